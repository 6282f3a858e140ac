"""Independent kernels under test written inside the harness (not production kernels)."""
