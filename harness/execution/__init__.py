"""How the harness calls a kernel under test and survives it.

``kernel_calls`` (every call to a kernel goes through here: exceptions and device faults become
findings), ``supervisor`` / ``worker`` / ``transport`` (kernel calls in a forked worker process, so a
crash or hang costs one case), ``guard_bands`` (poisoned guard regions around inputs and outputs).
"""
