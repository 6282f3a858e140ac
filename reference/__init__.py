"""The float64 NumPy oracle every kernel is judged against (SPEC.md; docs/interfaces.md section 4).

- ``reference.rng``: bit-exact replica of Triton's Philox and of the kernels' randomness layout.
- ``reference.verify``: ``verify_batch``, decision by decision, with decision margins.
- ``reference.laws``: exact conditional and output laws, ``E[tau]`` and its variance, the ceiling.
- ``reference.sampling``: fast inverse-CDF samplers of those laws.
- ``reference.chunking``: ``plan_chunks``, the request-preserving chunk plan.

Imports numpy (and scipy at most); never torch, triton or harness. ``python -m reference`` prints
the golden toy example of SPEC.md section 5.
"""
