"""How the harness decides right from wrong, below the properties that use it.

``oracle`` (the bridge to the float64 NumPy oracle in ``reference/``), ``decision_compare`` (kernel vs
oracle decision by decision, with float32 tie margins), ``output_checks`` (structural checks of one
output), ``consequences`` (relations the exact law implies without shared randomness),
``tolerances`` (the one tolerance table), ``stats`` (calibrated tests with stated alpha and power).
"""
