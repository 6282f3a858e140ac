"""Make Triton's function hash of every kernel the same in every process (compiled Triton only).

Triton's on-disk cache key includes ``JITFunction.cache_key``: a hash of the function's source, of
the hashes of the JIT functions it calls and of the ``tl.constexpr`` globals it uses, those of its
callees included. Triton 3.6 (the GPU image's) merges a callee's constexpr globals into the
caller's *before* it hashes the callee, so a callee hashed for the first time while its caller is
being hashed contributes none of them: the caller's hash then depends on which functions this
process happened to hash earlier. A prewarm process that compiled ``_row_stats_kernel`` first
(which hashes ``philox_uniform`` and friends) and check's worker that compiled ``_decide_kernel``
first computed different hashes for ``_decide_kernel``, ``_small_batch_kernel`` and
``_row_table_kernel``, so their prewarmed binaries were never found (issue 49).

``settle()`` removes the dependence on order: it hashes every JIT function of this package, then
forgets the hashes (keeping the constexpr globals each one collected) and hashes again, until no
hash changes. Each pass lets a function see the globals its callees collected in the pass before,
so the sets grow to their transitive closure, which does not depend on the order; the hashes at
that fixed point are what every process computes. Newer Triton (3.9) hashes callees first, and
settling then ends after the first confirming pass. ``kernels/__init__.py`` calls it once, after
every kernel module is imported and before anything can compile. Under the interpreter nothing is
hashed.
"""

from __future__ import annotations

import importlib
import pkgutil

# Modules that define no JIT function of a kernel (interpreter_patching only runs under the interpreter).
NOT_KERNEL_MODULES = frozenset({"interpreter_patching"})


def import_kernel_modules() -> list:
    """Every module of the ``kernels`` package that may define JIT functions, imported."""
    import kernels

    return [importlib.import_module(f"kernels.{info.name}") for info in pkgutil.iter_modules(kernels.__path__)
            if info.name not in NOT_KERNEL_MODULES]


def jit_functions() -> dict:
    """``{"module.name": JITFunction}`` for every ``@triton.jit`` function defined in ``kernels``
    (a ``kernels.launch.FastLaunch`` counts as the JIT function it wraps). Looking a function up
    never hashes it (``hasattr(fn, "cache_key")`` would)."""
    from triton.runtime.jit import JITFunction

    found = {}
    for module in import_kernel_modules():
        for value in vars(module).values():
            fn = value if isinstance(value, JITFunction) else getattr(value, "__dict__", {}).get("fn")
            if isinstance(fn, JITFunction) and fn.__module__ == module.__name__:
                found[f"{fn.__module__}.{fn.__name__}"] = fn
    return found


def launched_kernels() -> dict:
    """The subset of ``jit_functions()`` that is launched (wrapped in ``FastLaunch``)."""
    from kernels.launch import FastLaunch

    found = {}
    for module in import_kernel_modules():
        for value in vars(module).values():
            if isinstance(value, FastLaunch) and value.fn.__module__ == module.__name__:
                found[f"{module.__name__}.{value.fn.__name__}"] = value.fn
    return found


def settle(functions=None, max_passes: int = 64) -> int:
    """Hash ``functions`` (JIT functions; default: those of ``jit_functions()``) until no hash
    changes; returns the number of passes (1 when the first hashes were already final). Raises
    ``RuntimeError`` if the hashes do not settle, or if this Triton keeps no ``JITFunction.hash``."""
    functions = list(jit_functions().values() if functions is None else functions)
    if not all(hasattr(fn, "hash") and hasattr(fn, "used_global_vals") for fn in functions):
        raise RuntimeError("this Triton keeps no JITFunction.hash: function hashes cannot be settled")
    previous = [fn.cache_key for fn in functions]
    for passes in range(1, max_passes + 1):
        for fn in functions:
            fn.hash = None  # used_global_vals stays: the next pass builds on it
        now = [fn.cache_key for fn in functions]
        if now == previous:
            return passes
        previous = now
    raise RuntimeError(f"Triton function hashes did not settle in {max_passes} passes")
