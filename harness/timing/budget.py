"""``check --budget DURATION``: a time budget spent across the properties of one run.

Policy (equal shares with carry-over): before each claimed property, its deadline is now plus the
budget left divided by the number of claimed properties still to run. A property that finishes
early leaves its unused time to the ones after it; one that reaches its deadline stops starting new
cases (a case under way finishes; a statistical property stops before its next assertion). A
property not run to the end (fewer cases than its examples and anchors, or fewer assertions than
its suite) is reported ``skipped`` with a note starting ``skipped for budget``: never ``pass``,
because what it did not reach was not tested. A failure found before the deadline is still a
failure. Once the budget is spent, the remaining claimed properties are ``skipped for budget`` too
without running. Properties the kernel does not claim cost nothing and take no share.

Properties read their deadline with ``deadline_passed(ctx)``; the runner sets it
(``ctx.extra["deadline"]``, a ``time.perf_counter()`` value), and so does a fuzz campaign for its
statistical items (the campaign's own deadline); nothing else does, so a check without a budget
never stops early.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

DEADLINE_KEY = "deadline"
SKIPPED_FOR_BUDGET = "skipped for budget"


class BudgetSpent(BaseException):
    """Raised inside a property to stop starting cases (a BaseException, like the runner's
    ``Interrupted``: Hypothesis and the ``except Exception`` around kernel calls let it through
    at once, without shrinking it as a failure)."""


def deadline_passed(ctx) -> bool:
    deadline = ctx.extra.get(DEADLINE_KEY)
    return deadline is not None and time.perf_counter() >= deadline


def budget_note(done: int, planned: int, unit: str, seconds: float) -> str:
    return (f"{SKIPPED_FOR_BUDGET}: {done} of {planned} {unit} in {seconds:.1f}s "
            "(its share of the run's time budget)")


@dataclass
class Budget:
    """``seconds`` of wall time for a run's properties, shared as the module docstring says."""

    seconds: float
    started: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.started)

    def deadline(self, properties_left: int) -> float | None:
        """The next property's deadline, or None when the budget is spent."""
        left = self.left()
        if left <= 0:
            return None
        return time.perf_counter() + left / max(1, properties_left)

    def not_started_note(self) -> str:
        return f"{SKIPPED_FOR_BUDGET}: not started, check --budget {self.seconds:g}s was spent"
