"""Make any Triton hash JIT functions in Triton 3.6's order (tests/kernels/test_function_hashes.py).

Put this directory on PYTHONPATH and every Python process started from then on merges a callee's
constexpr globals into its caller *before* hashing the callee, as Triton 3.6's
``DependenciesFinder._update_hash`` does (Triton 3.9 hashes the callee first). On the GPU image's
Triton 3.6 this changes nothing; on CI's newer Triton it brings back the order dependence of the
function hash that issue 49 found, so the test can show that ``kernels.function_hashes.settle``
removes it whatever Triton runs.
"""

try:
    from triton.runtime.jit import DependenciesFinder, JITCallable
except ImportError:  # a Triton without these names: nothing to emulate
    DependenciesFinder = None

if DependenciesFinder is not None:

    def _update_hash_in_36_order(self, func):
        assert isinstance(func, JITCallable)
        for key in self.used_global_vals.keys() & func.used_global_vals.keys():
            if self.used_global_vals[key][0] != func.used_global_vals[key][0]:
                raise RuntimeError(f"global {key[0]} differs between {self.name} and {func.__name__}")
        self.used_global_vals.update(func.used_global_vals)  # before the callee is hashed
        self.hasher.update((func.cache_key + str(getattr(func, "noinline", False))).encode("utf-8"))

    DependenciesFinder._update_hash = _update_hash_in_36_order
