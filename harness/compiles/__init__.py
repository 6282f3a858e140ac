"""Triton compile specialisations of a run: ``keys`` (the key Triton compiles one binary for, computed
from a launch's arguments, and a launch log), ``planning`` (the keys an H200 run would compile, worked
out on a CPU without launching), ``prewarm`` (compile a run's keys in parallel before it starts)."""
