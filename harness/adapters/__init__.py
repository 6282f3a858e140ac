"""Adapters that present concrete verification kernels through the harness contract.

- ``harness.adapters.triton_kernels:kernel`` — our Triton kernels (the default kernel under test).
- ``harness.adapters.reference_kernel:kernel`` — the float64 oracle itself, wrapped as a kernel.
"""
