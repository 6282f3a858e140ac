"""How our kernels are compiled and launched: ``launch_jit``, then the compiled launcher called directly.

Triton's ``kernel[grid](...)`` binds arguments, specialises each one, builds a cache key and reads
several settings on every call; on the H200 machine that is ~30 us of the ~40 us a launch costs the
host, and one verification makes five to seven launches (docs/kernels-log.md). After
the first call for a given specialisation this module keeps Triton's compiled kernel and calls its
launcher with the same arguments Triton itself would pass.

Correctness rests on the cache key being at least as fine as Triton's specialisation. Per argument
(``spec_key``): the tensor dtype and 16-byte alignment, the int's type, ``== 1`` and ``% 16``; for the
arguments ``launch_jit`` exempts from specialisation only the dtype or the int's type; bools
and other values verbatim; plus the constexpr keywords, ``num_warps`` and the current device. A
caller may instead pass a ``variant`` that determines all of that for its arguments (the driver's
``launch_variant``): no per-argument work then; ``SPECFUZZ_FAST_LAUNCH_CHECK=1`` (every pytest run)
compares each variant with the per-argument key. Launch hooks (profilers) or the CPU interpreter
always take Triton's own path.

On by default since it was measured on the H200 (triton 3.6): one launch costs 11.0 us of host time
against 15.4 us through ``kernel[grid]`` (the compiled launcher alone: 6.5 us), and the GPU test
suite passes with it. Tests set ``ENABLED`` to compare it with Triton's own path.
Triton 3.6 keeps launch hooks in (usually empty) ``HookChain`` objects, which ``_hook_active`` tells
apart from a profiler's hooks.
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch

import kernels._device

ENABLED = True
# Verify every ``variant`` against the full per-argument key (pytest sets SPECFUZZ_FAST_LAUNCH_CHECK=1).
CHECK_VARIANTS = os.environ.get("SPECFUZZ_FAST_LAUNCH_CHECK", "0") == "1"


def arg_spec(arg, loose: bool = False):
    """What Triton specialises an argument on; ``loose``: listed in ``do_not_specialize`` (ints: only
    their integer type) or ``do_not_specialize_on_alignment`` (pointers: only their dtype)."""
    if isinstance(arg, torch.Tensor):
        return arg.dtype if loose else (arg.dtype, arg.data_ptr() % 16 == 0)
    if isinstance(arg, bool) or arg is None:
        return arg
    if isinstance(arg, int):
        kind = (-(2**31) <= arg < 2**31, 0 <= arg < 2**63)
        return kind if loose else (*kind, arg == 1, arg % 16 == 0)
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


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton's CUDA driver calls
_GET_DEVICE = getattr(torch._C, "_cuda_getDevice", None)  # torch.cuda.current_device() minus its init check


def current_raw_stream(device: int) -> int:
    return _RAW_STREAM(device) if _RAW_STREAM is not None else torch.cuda.current_stream(device).cuda_stream


def device_index(device: torch.device) -> int:
    """The CUDA device's index (the current device for a bare ``torch.device("cuda")``)."""
    return device.index if device.index is not None else torch.cuda.current_device()


_STREAMS: dict = {}


def current_stream(device_index: int) -> torch.cuda.Stream:
    """``torch.cuda.current_stream(device)`` for a few hundred nanoseconds instead of ~5 us (H200 host):
    the Stream objects are kept per raw stream handle. Torch never frees the streams of its pools, and
    a handle torch hands out again after an external stream died is looked up anew (the object only
    names the stream, so a kept one for a live handle synchronises that stream)."""
    raw = current_raw_stream(device_index)
    stream = _STREAMS.get((device_index, raw))
    if stream is None:
        stream = torch.cuda.current_stream(device_index)
        if len(_STREAMS) > 64:  # streams created and dropped in a loop: forget them
            _STREAMS.clear()
        _STREAMS[(device_index, raw)] = stream
    return stream


def _current_device() -> int:
    """Only called once a CUDA tensor exists (a launch), so CUDA is initialised."""
    return _GET_DEVICE() if _GET_DEVICE is not None else torch.cuda.current_device()


_recorder = threading.local()


@contextlib.contextmanager
def recording():
    """Collect every ``FastLaunch`` launch this thread makes inside the block, as
    ``(kernel, grid, args, kwargs, variant)`` in launch order (the launches still run). Call plans
    (kernels/call_plan.py) replay a chunk's launch sequence from such a record."""
    launches: list = []
    previous = getattr(_recorder, "launches", None)
    _recorder.launches = launches
    try:
        yield launches
    finally:
        _recorder.launches = previous


def launch_jit(*, counts: tuple[str, ...] = (), small_pointers: tuple[str, ...] = ()):
    """``triton.jit`` for a top-level kernel, without value specialisation of ``counts`` (request,
    row, block counts: Triton would otherwise compile a variant for every ``== 1`` / ``% 16``
    pattern, and chunks or fuzzed batches hit many) and without alignment specialisation of
    ``small_pointers`` (metadata, outputs and workspace views read one scalar per program: chunk
    slices start at any offset). Logit pointers, strides and ``vocab_size`` stay specialised:
    they decide vectorised loads in the bandwidth-bound passes and are fixed per model. Launches go
    through ``FastLaunch``."""
    import triton

    jit = triton.jit(do_not_specialize=counts, do_not_specialize_on_alignment=small_pointers)
    return lambda fn: FastLaunch(jit(fn), loose_names=(*counts, *small_pointers))


class FastLaunch:
    """``FastLaunch(jit_fn)[grid](*runtime_args, **constexprs_and_num_warps)``.

    Runtime arguments must be positional, in signature order, and every parameter after them must be
    a keyword (the constexprs); ``num_warps`` may be given too.
    """

    def __init__(self, fn, loose_names=()):
        self.fn = fn
        self.cache: dict = {}
        self.loose = tuple(name in loose_names for name in getattr(fn, "arg_names", ()))

    def spec_key(self, args) -> tuple:
        """Per argument, what Triton specialises it on (``loose_names``: the launch_jit exemptions)."""
        loose = self.loose
        return tuple(arg_spec(a, i < len(loose) and loose[i]) for i, a in enumerate(args))

    def __getitem__(self, grid):
        return lambda *args, variant=None, **kwargs: self.launch(grid, args, kwargs, variant)

    def __getattr__(self, name):  # everything else (arg_names, fn, ...) is the JIT function's
        return getattr(self.fn, name)

    def bind(self, grid, kwargs, variant=None):
        """``launch`` split in two: the cache lookup now, the launch when the returned callable gets
        the runtime arguments (``bound(*args)``). The driver binds while its value check is in flight,
        so that after the check only the launcher runs. Without a ``variant`` or a cached kernel for
        it yet, or when ``launch`` would take Triton's path, ``bound`` is ``launch``; otherwise it
        calls the compiled launcher directly (``bound.direct`` is True), after checking the variant
        against the per-argument key when ``CHECK_VARIANTS`` is set. Launch hooks are looked at when
        binding (a profiler attached between the two is missed)."""
        if variant is None or not ENABLED or kernels._device.INTERPRETING or _hooks_set():
            return lambda *args: self.launch(grid, args, kwargs, variant)
        device = _current_device()
        entry = self.cache.get((device, variant, *kwargs.items()))
        if entry is None:
            return lambda *args: self.launch(grid, args, kwargs, variant)
        compiled, constexprs, full_key = entry
        dims = len(grid)
        x, y, z = grid[0], grid[1] if dims > 1 else 1, grid[2] if dims > 2 else 1
        run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
        check = CHECK_VARIANTS

        def bound(*args):
            if check:
                self._check_variant(variant, full_key, (device, self.spec_key(args), *kwargs.items()))
            run(x, y, z, current_raw_stream(device), function, metadata, None, None, None, *args, *constexprs)
            return compiled
        bound.direct = True
        return bound

    def _check_variant(self, variant, full_key, full) -> None:
        if full_key != full:
            name = getattr(self.fn, "__name__", "kernel")
            raise AssertionError(f"{name}: variant {variant!r} covers two specialisations: "
                                 f"{full_key!r} and {full!r}")

    def launch(self, grid, args, kwargs, variant=None):
        """``variant``: a caller-made key that determines every specialisation of ``args`` (the
        driver's: dtypes, logit alignment and strides, vocabulary class), so the per-argument key is
        skipped; ``CHECK_VARIANTS`` verifies that claim on every launch."""
        record = getattr(_recorder, "launches", None)
        if record is not None:
            record.append((self, grid, args, kwargs, variant))
        if not ENABLED or kernels._device.INTERPRETING or _hooks_set():
            return self.fn[grid](*args, **kwargs)
        device = _current_device()
        # kwargs in call-site order: another order only makes another entry with the same kernel
        if variant is None or CHECK_VARIANTS:
            full = (device, self.spec_key(args), *kwargs.items())
        key = (device, variant, *kwargs.items()) if variant is not None else full
        entry = self.cache.get(key)
        if entry is None:
            compiled = self.fn[grid](*args, **kwargs)  # Triton's path: compiles if needed and launches
            names = self.fn.arg_names[len(args):]
            if compiled is not None and hasattr(compiled, "run") and set(names) <= set(kwargs):
                full_key = full if variant is None or CHECK_VARIANTS else None
                self.cache[key] = (compiled, tuple(kwargs[name] for name in names), full_key)
            return compiled
        compiled, constexprs, full_key = entry
        if CHECK_VARIANTS and variant is not None:
            self._check_variant(variant, full_key, full)
        dims = len(grid)
        # launch metadata, enter hook, exit hook: none set
        compiled.run(grid[0], grid[1] if dims > 1 else 1, grid[2] if dims > 2 else 1,
                     current_raw_stream(device), compiled.function, compiled.packed_metadata,
                     None, None, None, *args, *constexprs)
        return compiled
