"""Which Triton specialisations a run's launches use, and (on a GPU) what compiling them cost.

Triton compiles one binary per *specialisation key* of a ``@triton.jit`` kernel: the value of every
``tl.constexpr`` parameter, each pointer's dtype and (unless the parameter is listed in
``do_not_specialize_on_alignment``) whether its address is a multiple of 16, each integer's type and
(unless listed in ``do_not_specialize``) whether it equals 1 and whether it is a multiple of 16, and
the launch options (``num_warps``, ``maxnreg``, ``launch_pdl`` ...). ``specialisation_key`` computes
that key from a launch's arguments the way Triton does, so the count of distinct keys is known on a
CPU machine, where the interpreter compiles nothing.

- ``LaunchLog``: a context manager that wraps ``JITFunction.run`` (compiled) and
  ``InterpretedFunction.run`` (interpreter) and records ``(kernel name, key)`` of every launch that
  goes through Triton's own launch path. Launchers that call a compiled kernel directly (our
  ``kernels.launch.FastLaunch`` after a key's first launch) skip ``run``; every key still passes
  through it once, so the distinct keys are complete, the launch count is not.
- ``CompileLog``: on a GPU, Triton's own hooks (``knobs.runtime.jit_cache_hook`` /
  ``jit_post_compile_hook``, triton >= 3.3; ``knobs.compilation.listener`` for cache hits) count the
  keys a process compiled or loaded from the on-disk cache and the seconds each took.
- ``varied(keys)``: per kernel, which parameters took more than one class over a set of keys (the
  "why" of a compile count).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

INT32_RANGE = (-(2**31), 2**31 - 1)


def arg_class(value, specialise: bool = True, align: bool = True) -> str:
    """What Triton's specialisation keeps of one runtime argument, as a short readable string.

    Tensors: ``*<dtype>`` plus ``/16`` when the address is 16-byte aligned (alignment specialised);
    ints: ``1`` when specialised and equal to 1, else ``i32`` / ``i64`` / ``u64`` plus ``/16`` when
    specialised and a multiple of 16; floats ``fp32``; bools ``u1``; None ``None``."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "u1"
    if isinstance(value, int):
        if specialise and value == 1:
            return "1"
        kind = "i32" if INT32_RANGE[0] <= value <= INT32_RANGE[1] else "u64" if value >= 2**63 else "i64"
        return kind + ("/16" if specialise and value % 16 == 0 else "")
    if isinstance(value, float):
        return "fp32"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and hasattr(value, "data_ptr"):
        name = str(dtype).removeprefix("torch.")
        return f"*{name}" + ("/16" if align and value.data_ptr() % 16 == 0 else "")
    return f"{type(value).__name__}:{value!r}"


@dataclass(frozen=True)
class Param:
    name: str
    constexpr: bool
    specialise: bool
    align: bool


def kernel_params(fn) -> list[Param]:
    """The parameters of a Triton kernel (``JITFunction`` or ``InterpretedFunction``) with their
    specialisation flags."""
    cached = getattr(fn, "_specfuzz_params", None)
    if cached is not None:
        return cached
    params = getattr(fn, "params", None)
    if params is not None and params and hasattr(params[0], "is_constexpr"):  # JITFunction
        out = [Param(p.name, bool(p.is_constexpr), not p.do_not_specialize,
                     not p.do_not_specialize_on_alignment) for p in params]
    else:  # InterpretedFunction keeps the decorator's keywords and the Python function
        options = getattr(fn, "kwargs", {}) or {}
        no_value = set(options.get("do_not_specialize") or ())
        no_align = set(options.get("do_not_specialize_on_alignment") or ())
        out = []
        for i, p in enumerate(inspect.signature(fn.fn).parameters.values()):
            constexpr = "constexpr" in str(p.annotation)
            out.append(Param(p.name, constexpr, not ({i, p.name} & no_value), not ({i, p.name} & no_align)))
    try:
        fn._specfuzz_params = out
    except AttributeError:
        pass
    return out


def kernel_name(fn) -> str:
    inner = getattr(fn, "fn", fn)
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', repr(inner))}"


def specialisation_key(fn, args: tuple, kwargs: dict) -> tuple:
    """``((param, class), ...)`` for the parameters, then ``(option, value)`` for the launch options,
    sorted: equal keys share one compiled binary, different keys compile separately."""
    params = kernel_params(fn)
    values = dict(zip((p.name for p in params), args, strict=False))  # trailing defaults
    values.update({k: v for k, v in kwargs.items() if k in {p.name for p in params}})
    key = []
    for p in params:
        if p.name not in values:
            continue  # a default: the same for every launch
        v = values[p.name]
        cls = repr(getattr(v, "value", v)) if p.constexpr else arg_class(v, p.specialise, p.align)
        key.append((p.name, cls))
    names = {p.name for p in params}
    key += sorted((k, repr(v)) for k, v in kwargs.items() if k not in names and k not in ("grid", "warmup"))
    return tuple(key)


@dataclass
class LaunchRecord:
    kernel: str
    key: tuple


class LaunchLog:
    """Records the specialisation key of every launch through Triton's ``run`` inside the block (all
    threads). ``records`` in launch order; ``mark()`` / ``since(mark)`` slice them per property."""

    def __init__(self):
        self.records: list[LaunchRecord] = []
        self._lock = threading.Lock()
        self._undo: list = []

    def _wrap(self, cls) -> None:
        original = cls.run
        log = self

        def run(fn_self, *args, grid, warmup, **kwargs):
            if not warmup:
                key = specialisation_key(fn_self, args, kwargs)
                with log._lock:
                    log.records.append(LaunchRecord(kernel_name(fn_self), key))
            return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)

        cls.run = run
        self._undo.append((cls, original))

    def __enter__(self) -> LaunchLog:
        from triton.runtime.jit import JITFunction

        self._wrap(JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:  # pragma: no cover - every supported triton has the interpreter
            InterpretedFunction = None
        if InterpretedFunction is not None:
            self._wrap(InterpretedFunction)
        return self

    def __exit__(self, *exc) -> None:
        for cls, original in reversed(self._undo):
            cls.run = original
        self._undo.clear()

    def mark(self) -> int:
        return len(self.records)

    def since(self, mark: int) -> list[LaunchRecord]:
        return self.records[mark:]


def distinct(records) -> set[tuple[str, tuple]]:
    return {(r.kernel, r.key) for r in records}


def varied(keys) -> dict[str, dict[str, list[str]]]:
    """Per kernel (short name), the parameters and options that took more than one class over
    ``keys`` (``(kernel, key)`` pairs), each with its sorted classes."""
    seen: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for kernel, key in keys:
        for name, cls in key:
            seen[kernel.rsplit(".", 1)[-1]][name].add(cls)
    return {k: {n: sorted(v) for n, v in params.items() if len(v) > 1} for k, params in sorted(seen.items())}


def per_kernel(keys) -> Counter:
    return Counter(kernel.rsplit(".", 1)[-1] for kernel, _ in keys)


@dataclass
class CompileEvent:
    kernel: str
    key: str
    seconds: float  # from Triton's cache-miss hook to its post-compile hook: compile or disk load
    cache_hit: bool | None = None  # from the compilation listener (None: not reported)


@dataclass
class CompileLog:
    """Triton's in-process compile events inside the block (GPU; nothing happens under the
    interpreter). ``events[i].cache_hit`` is True for a binary loaded from the on-disk cache (a warm
    cache), False for a real compile. Hooks already set by someone else are chained, not replaced."""

    events: list[CompileEvent] = field(default_factory=list)
    available: bool = False

    def __enter__(self) -> CompileLog:
        try:
            from triton import knobs
        except ImportError:  # triton < 3.3: no knobs, no hooks; counts come from LaunchLog alone
            return self
        runtime = knobs.runtime
        if not hasattr(runtime, "jit_cache_hook") or not hasattr(runtime, "jit_post_compile_hook"):
            return self
        self.available = True
        self._knobs = knobs
        self._saved = (runtime.jit_cache_hook, runtime.jit_post_compile_hook,
                       getattr(knobs.compilation, "listener", None))
        started: dict = {}
        previous_cache, previous_post, previous_listener = self._saved
        listener_hits: list = []

        def on_miss(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
            started[(id(fn.jit_function), key)] = time.perf_counter()
            if previous_cache is None:
                return None
            return previous_cache(key=key, repr=repr, fn=fn, compile=compile,
                                  is_manual_warmup=is_manual_warmup, already_compiled=already_compiled)

        def on_done(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
            t0 = started.pop((id(fn.jit_function), key), None)
            hit = listener_hits.pop() if listener_hits else None
            self.events.append(CompileEvent(f"{fn.module}.{fn.name}", str(key),
                                            time.perf_counter() - t0 if t0 else 0.0, hit))
            if previous_post:
                return previous_post(key=key, repr=repr, fn=fn, compile=compile,
                                     is_manual_warmup=is_manual_warmup, already_compiled=already_compiled)
            return None

        def on_compiled(*, src, metadata, metadata_group, times, cache_hit):
            listener_hits.append(bool(cache_hit))
            if previous_listener:
                previous_listener(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                                  cache_hit=cache_hit)

        runtime.jit_cache_hook = on_miss
        runtime.jit_post_compile_hook = on_done
        if hasattr(knobs.compilation, "listener"):
            knobs.compilation.listener = on_compiled
        return self

    def __exit__(self, *exc) -> None:
        if not self.available:
            return
        runtime = self._knobs.runtime
        runtime.jit_cache_hook, runtime.jit_post_compile_hook, listener = self._saved
        if hasattr(self._knobs.compilation, "listener"):
            self._knobs.compilation.listener = listener

    def mark(self) -> int:
        return len(self.events)

    def since(self, mark: int) -> list[CompileEvent]:
        return self.events[mark:]
