"""What a property is, what it returns, and the registry the runner walks.

A property is one claim about a kernel (DESIGN.md layers 1-5). It decides whether the kernel claims
it (``claimed``), runs its cases under a ``RunContext``, and returns a ``PropertyResult`` whose verdict
is ``pass``, ``fail``, ``not claimed``, ``skipped`` (claimed but over the profile's budget) or
``error``. Results serialise to the report schema of
docs/interfaces.md section 5.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from harness.profiles import Profile

PASS, FAIL, NOT_CLAIMED, ERROR = "pass", "fail", "not claimed", "error"
# Claimed, but not run within this profile's budget (e.g. statistics on the CPU interpreter). Never
# counted as passed; the note says why and how to run it (a GPU, a larger budget).
SKIPPED = "skipped"


@dataclass
class RunContext:
    """Everything a property needs besides the kernel."""

    profile: Profile
    device: torch.device
    seed: int  # the run's root seed; properties derive their own with ``child_seed``
    kernel_spec: str = ""  # how the kernel was named on the command line (for repro commands)
    fail_fast: bool = False  # stop a property at its first confirmed failure
    extra: dict = field(default_factory=dict)

    def child_seed(self, *labels: object) -> int:
        """A seed derived deterministically from the run seed and labels (never a global RNG)."""
        ss = np.random.SeedSequence([self.seed, *[zlib.crc32(str(x).encode()) for x in labels]])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def rng(self, *labels: object) -> np.random.Generator:
        return np.random.default_rng(self.child_seed(*labels))

    @property
    def device_type(self) -> str:
        """The device kind that fixed cases are sized for: the tensors' device, unless a planning
        run on the CPU stands in for a GPU (``extra["sized_for"]``, harness/compiles/planning.py)."""
        return self.extra.get("sized_for", self.device.type)

    @property
    def progress(self):
        """Where a property reports how far it got (harness/timing/progress.py; silent unless set)."""
        from harness.timing.progress import NULL

        return self.extra.get("progress") or NULL


@dataclass
class StatRecord:
    """One statistical assertion: its statistic, p-value, and the alpha and power it was sized for."""

    name: str
    n: int
    cells: int
    statistic: float
    p_value: float
    alpha: float
    power: float
    detectable_tv: float
    rejected: bool = False
    confirmed: bool | None = None  # outcome of the re-run with fresh randomness, if one was made
    observed: list = field(default_factory=list)
    expected: list = field(default_factory=list)
    labels: list = field(default_factory=list)


@dataclass
class Finding:
    """One failure: enough to understand it and to reproduce it with one command."""

    cls: str  # failure class, e.g. "id_out_of_range", "coupled_mismatch", "law_rejected"
    first_field: str  # first differing output field, e.g. "output_token_ids[3,1]"
    message: str
    case: dict = field(default_factory=dict)  # self-contained case description (harness/generation/cases.py)
    evidence: dict = field(default_factory=dict)
    repro: str = ""


@dataclass
class PropertyResult:
    name: str
    layer: int
    verdict: str
    cases: int = 0
    seconds: float = 0.0
    ties: int = 0
    statistics: list[StatRecord] = field(default_factory=list)
    failures: list[Finding] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for f in d["failures"]:
            f["class"] = f.pop("cls")
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PropertyResult:
        """Inverse of ``to_json`` (used to fold in results computed in a subprocess)."""
        d = dict(d)
        stat_fields = StatRecord.__dataclass_fields__
        stats = [
            StatRecord(**{k: v for k, v in s.items() if k in stat_fields}) for s in d.pop("statistics", [])
        ]
        failures = []
        for f in d.pop("failures", []):
            f = dict(f)
            f["cls"] = f.pop("class")
            failures.append(Finding(**{k: v for k, v in f.items() if k in Finding.__dataclass_fields__}))
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known, statistics=stats, failures=failures)


class Property(Protocol):
    name: str
    layer: int

    def claimed(self, kernel: object) -> bool: ...

    def run(self, kernel: object, ctx: RunContext) -> PropertyResult: ...


REGISTRY: dict[str, Property] = {}


def not_claimed_reason(prop: Property, kernel: object) -> str | None:
    """Why ``kernel`` does not claim ``prop`` (``None``: it does): the property's own
    ``not_claimed_reason`` when it has one, else a generic line when ``claimed`` says no (a property
    with neither is claimed)."""
    own = getattr(prop, "not_claimed_reason", None)
    if callable(own):
        return own(kernel)
    claimed = getattr(prop, "claimed", None)
    return None if not callable(claimed) or claimed(kernel) else f"the kernel does not claim {prop.name}"


def unclaimed_result(prop: Property, kernel: object) -> PropertyResult | None:
    """A ``not claimed`` result when ``kernel`` does not claim ``prop``, else ``None``. The runner
    asks this before every property, so a property is never run (and a kernel never called with a
    method, dtype or feature it does not declare) just because its ``run`` forgot to ask."""
    reason = not_claimed_reason(prop, kernel)
    return None if reason is None else PropertyResult(prop.name, prop.layer, NOT_CLAIMED, note=reason)


def register(prop: Property) -> Property:
    """Add a property to the registry (names are unique; re-registering replaces)."""
    REGISTRY[prop.name] = prop
    return prop
