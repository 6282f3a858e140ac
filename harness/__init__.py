"""specfuzz's harness: kernel-agnostic machinery that judges verification kernels against the oracle.

Top level: ``contract`` (``VerifyBatch``, ``VerifyOutput``, ``Capabilities``: what a kernel under test
meets), ``wellformed`` (what makes a batch well formed), ``plugins`` (loading a kernel named
``package.module:attr``), ``profiles`` (sizes and budgets per profile), ``runner`` (runs properties
over a kernel and collects verdicts), ``cli`` (``python -m harness``).

Subpackages, in the order data flows: ``generation`` (cases and strategies) -> ``execution`` (calling
the kernel, supervised) -> ``properties`` (the layers of judgement), built on ``judging`` (oracle,
comparisons, statistics) -> ``reporting``. ``campaigns`` (fuzz, corpus, calibration) and ``golden``
(record / diff) drive those; ``mutation`` proves the properties catch bugs; ``timing`` (budgets,
progress, time breakdowns) and ``compiles`` (Triton specialisations: planned, counted, prewarmed)
keep a GPU run fast. ``adapters`` wrap kernels
(ours, the oracle, vLLM's) in the contract; ``implementations`` and ``broken`` are kernels the harness
is tested with. Imports go one way: no cycle between modules or between subpackages
(tests/harness/test_import_layout.py).
"""
