"""Progress inside a property, for people at a terminal: ``[structural] 23/60 cases, 41s, ~66s left``.

One status line on stderr, rewritten in place (carriage return) at most every ``interval`` seconds
and erased when the property ends, so the per-property result lines stay as they were. Silent when
stderr is not a terminal or the ``CI`` environment variable is set (CI logs keep no carriage
returns), and when ``check --quiet`` is given. The estimate is the mean time per unit so far times
the units left; shrinking a failure may take longer than it says.

Properties reach it as ``ctx.progress`` (harness/properties/base.py): ``start(name, total, unit)``,
``advance(done)``, ``finish()``. ``NULL`` does nothing.
"""

from __future__ import annotations

import os
import sys
import time


def wanted(stream) -> bool:
    """A terminal, and not CI."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI")


class Progress:
    def __init__(self, stream=None, enabled: bool | None = None, interval: float = 0.5,
                 clock=time.perf_counter):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.interval, self.clock = interval, clock
        self.name, self.total, self.unit = "", 0, "cases"
        self.started = self.shown_at = 0.0
        self.width = 0

    def start(self, name: str, total: int, unit: str = "cases") -> None:
        self.name, self.total, self.unit = name, max(0, int(total)), unit
        self.started = self.clock()
        self.shown_at = -float("inf")

    def line(self, done: int) -> str:
        elapsed = self.clock() - self.started
        text = f"[{self.name}] {done}/{self.total} {self.unit}, {elapsed:.0f}s"
        if 0 < done < self.total:
            text += f", ~{elapsed / done * (self.total - done):.0f}s left"
        return text

    def advance(self, done: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.shown_at < self.interval:
            return
        self.shown_at = now
        text = self.line(done)
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def finish(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
        self.width = 0


NULL = Progress(enabled=False)
