"""Where a property's wall time goes: kernel calls, case building, the oracle, and the rest.

``TimeSplit`` keeps exclusive seconds per bucket: time inside a nested bucket (the oracle called by
a reference kernel's ``verify``) counts for the inner bucket only. ``TimeSplit.instrument()`` wraps,
for the duration of a ``with`` block:

- ``build``: ``harness.generation.cases.build_batch`` (bulk logits from their seed, the dtype cast and the
copy
  to the device) wherever a harness module imported it;
- ``oracle``: every ``reference`` function a harness module imported, and ``harness.judging.oracle``'s
  bridges (``run_reference``, ``reference_draws``), which also stand for the float64 copies;
- ``kernel``: calls of the kernel under test through ``TimedKernel`` (``verify``, ``random_draws``,
  ``verify_into``), synchronised with the device on CUDA so that asynchronous work is counted.

Functions are re-bound in every loaded ``harness.*`` module that holds them (properties import them
by name), and restored on exit.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import time
from collections import defaultdict


class TimeSplit:
    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [bucket, started]

    def enter(self, bucket: str) -> None:
        now = time.perf_counter()
        if self._stack:
            outer = self._stack[-1]
            self.seconds[outer[0]] += now - outer[1]
        self._stack.append([bucket, now])
        self.calls[bucket] += 1

    def leave(self) -> None:
        now = time.perf_counter()
        bucket, started = self._stack.pop()
        self.seconds[bucket] += now - started
        if self._stack:
            self._stack[-1][1] = now

    def wrap(self, bucket: str, fn):
        split = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            split.enter(bucket)
            try:
                return fn(*args, **kwargs)
            finally:
                split.leave()

        timed.__specfuzz_original__ = fn
        return timed

    def snapshot(self) -> tuple[dict, dict]:
        return dict(self.seconds), dict(self.calls)

    @staticmethod
    def delta(before: tuple[dict, dict], after: tuple[dict, dict]) -> tuple[dict, dict]:
        secs = {k: after[0].get(k, 0.0) - before[0].get(k, 0.0) for k in after[0]}
        calls = {k: after[1].get(k, 0) - before[1].get(k, 0) for k in after[1]}
        return secs, calls

    @contextlib.contextmanager
    def instrument(self):
        """Re-bind the build and oracle functions in every loaded harness module (module docstring)."""
        import harness.generation.cases
        import harness.judging.oracle

        targets = {
            harness.generation.cases.build_batch: "build",
            harness.judging.oracle.run_reference: "oracle",
            harness.judging.oracle.reference_draws: "oracle",
        }
        undo = []
        wrappers: dict = {}
        for name, module in list(sys.modules.items()):
            if not (name == "harness" or name.startswith("harness.")) or module is None:
                continue
            for attr, value in list(vars(module).items()):
                if not inspect.isfunction(value):
                    continue
                bucket = targets.get(value)
                if bucket is None and (value.__module__ or "").startswith("reference."):
                    bucket = "oracle"
                if bucket is None:
                    continue
                if value not in wrappers:
                    wrappers[value] = self.wrap(bucket, value)
                setattr(module, attr, wrappers[value])
                undo.append((module, attr, value))
        try:
            yield self
        finally:
            for module, attr, value in reversed(undo):
                setattr(module, attr, value)


class TimedKernel:
    """The kernel under test with its calls timed in ``split``'s ``kernel`` bucket. Every other
    attribute is the kernel's own, and a call it lacks (``verify_into``, ``random_draws``) stays
    absent, so the properties claim what they would claim for the kernel itself."""

    CALLS = ("verify", "random_draws", "verify_into", "plan_only")

    def __init__(self, kernel, split: TimeSplit, synchronise):
        self._kernel, self._split, self._sync = kernel, split, synchronise

    def __getattr__(self, name):
        value = getattr(self._kernel, name)
        if name not in self.CALLS or not callable(value):
            return value
        split, sync = self._split, self._sync

        def call(*args, **kwargs):
            split.enter("kernel")
            try:
                out = value(*args, **kwargs)
                sync()
                return out
            finally:
                split.leave()

        return call
