"""Lower host cost per kernel launch: call the compiled kernel's launcher directly once it is known.

Triton's ``kernel[grid](...)`` binds arguments, specialises each one, builds a cache key and reads
several settings on every call; on the H200 machine that is ~30 us of the ~40 us a launch costs the
host, and one verification makes five to seven launches (docs/kernels.md, performance log). After
the first call for a given specialisation this module keeps Triton's compiled kernel and calls its
launcher with the same arguments Triton itself would pass.

Correctness rests on the cache key being at least as fine as Triton's: per argument the tensor dtype
and 16-byte alignment, the int's range class, ``== 1`` and ``% 16``, bools and other values verbatim,
the constexpr keywords and ``num_warps``, and the current device. Launch hooks (profilers) or the CPU
interpreter always take Triton's own path.

OPT-IN (``SPECFUZZ_FAST_LAUNCH=1``) until measured: on the H200 (triton 3.6) the fast path was never
taken in the one profiled run, because 3.6 keeps launch hooks in empty ``HookChain`` objects rather
than None and the hook check read them as set; that check is fixed (``_hook_active``) but the fast
path itself has not run on a GPU yet (docs/kernels.md, performance log).
"""

from __future__ import annotations

import os

import torch

import kernels._device


def _arg_key(arg):
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0)
    if isinstance(arg, bool) or arg is None:
        return arg
    if isinstance(arg, int):
        return (-(2**31) <= arg < 2**31, 0 <= arg < 2**63, arg == 1, arg % 16 == 0)
    if isinstance(arg, float):
        return float
    return (type(arg), arg)


def _hook_active(hook) -> bool:
    """Triton 3.6 keeps launch hooks in (usually empty) ``HookChain`` objects, older ones as None."""
    return hook is not None and bool(getattr(hook, "calls", True))


try:
    from triton import knobs as _knobs
except ImportError:  # older Triton: no knobs module, no hooks to honour here
    _knobs = None


def _hooks_set() -> bool:
    if _knobs is None:
        return False
    runtime = _knobs.runtime
    return _hook_active(runtime.launch_enter_hook) or _hook_active(runtime.launch_exit_hook)


def _current_raw_stream(device: int) -> int:
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton's CUDA driver calls
    return getter(device) if getter is not None else torch.cuda.current_stream(device).cuda_stream


class FastLaunch:
    """``FastLaunch(jit_fn)[grid](*runtime_args, **constexprs_and_num_warps)``.

    Runtime arguments must be positional, in signature order, and every parameter after them must be
    a keyword (the constexprs); ``num_warps`` may be given too.
    """

    def __init__(self, fn):
        self.fn = fn
        self.cache: dict = {}

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def __getattr__(self, name):  # everything else (arg_names, fn, ...) is the JIT function's
        return getattr(self.fn, name)

    def launch(self, grid, args, kwargs):
        opted_in = os.environ.get("SPECFUZZ_FAST_LAUNCH", "0") == "1"
        if kernels._device.INTERPRETING or not opted_in or _hooks_set():
            return self.fn[grid](*args, **kwargs)
        device = torch.cuda.current_device()
        key = (device, tuple(map(_arg_key, args)), tuple(sorted(kwargs.items())))
        entry = self.cache.get(key)
        if entry is None:
            compiled = self.fn[grid](*args, **kwargs)  # Triton's path: compiles if needed and launches
            names = self.fn.arg_names[len(args):]
            if compiled is not None and hasattr(compiled, "run") and set(names) <= set(kwargs):
                self.cache[key] = (compiled, tuple(kwargs[name] for name in names))
            return compiled
        compiled, constexprs = entry
        grid = tuple(grid) + (1, 1)
        stream = _current_raw_stream(device)
        hooks_and_metadata = (None, None, None)  # launch metadata, enter hook, exit hook: none set
        compiled.run(grid[0], grid[1], grid[2], stream, compiled.function, compiled.packed_metadata,
                     *hooks_and_metadata, *args, *constexprs)
        return compiled
