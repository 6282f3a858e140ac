"""Diff a golden file against mutants of ``kernels/`` (the catalogue of ``harness.mutation.catalogue``).

For each mutant, ``harness.mutation.mutate.make_copy`` writes a mutated copy of ``kernels/`` to a temporary
directory and a child process (``harness.mutation.mutate.run_child``: the copy first on ``sys.path``, and a
refusal to run if ``kernels`` came from anywhere else) runs ``python -m harness diff --against FILE
--kernel SPEC --json OUT``. The real tree is never touched. Argued-
equivalent mutants are run too: their diff should come out identical.

``MutantDiff.outcome``: ``reported`` when the diff exited 1 (a new answer wrong) or 3 (changed,
legal), ``crashed`` when the child died from a signal (a mutated kernel reading far out of bounds
under the CPU interpreter segfaults it: not unnoticed, as ``harness mutate`` counts it),
``identical`` (exit 0: the golden cases do not reach the mutant), ``error`` (exit 2), ``timeout``.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.mutation.catalogue import Mutant
from harness.mutation.mutate import make_copy, run_child


@dataclass
class MutantDiff:
    name: str
    exit_code: int | None
    counts: dict = field(default_factory=dict)
    seconds: float = 0.0
    first: str = ""  # the first differing case's summary line
    detail: str = ""

    @property
    def outcome(self) -> str:
        if self.exit_code is None:
            return "timeout"
        if self.exit_code < 0:
            return f"crashed (signal {-self.exit_code})"
        return {0: "identical", 1: "reported", 3: "reported"}.get(self.exit_code, "error")


def diff_mutant(
    mutant: Mutant,
    golden_path: Path,
    kernel_spec: str,
    timeout_s: float = 600.0,
    device: str | None = None,
    fail_fast: bool = False,
) -> MutantDiff:
    """Run the diff of ``golden_path`` against ``kernel_spec`` on a copy of ``kernels/`` with ``mutant``
    (``fail_fast``: the child stops after its first case with a new answer wrong)."""
    with tempfile.TemporaryDirectory(prefix="specfuzz-golden-mutant-") as tmp:
        root = Path(tmp)
        make_copy(root, mutant)
        out = root / "diff.json"
        args = (
            [
                "diff",
                "--against",
                str(Path(golden_path).resolve()),
                "--kernel",
                kernel_spec,
                "--json",
                str(out),
                "--quiet",
            ]
            + (["--device", device] if device else [])
            + (["--fail-fast"] if fail_fast else [])
        )
        code, text, seconds = run_child(root, args, None, timeout_s)
        if code is None:
            return MutantDiff(mutant.name, None, seconds=seconds)
        report = json.loads(out.read_text()) if out.is_file() else {}
    first = ""
    for c in report.get("cases", []):
        verdict = c["requests"][0]["verdict"] if c["requests"] else c["status"]
        first = f"case {c['index']} {c['first_field']}: {verdict}"
        break
    tail = "\n".join((text or "").strip().splitlines()[-3:])
    return MutantDiff(mutant.name, code, report.get("counts", {}), seconds, first, tail)


def mutant_table(rows: list[MutantDiff]) -> str:
    head = (
        f"{'mutant':<36} {'outcome':<19} {'exit':>4} {'run':>7} {'differ':>6} {'new wrong':>9} "
        f"{'old wrong':>9} {'both legal':>10} {'in support':>10} {'s':>6}  first difference"
    )
    lines = [head]
    for m in rows:
        c = m.counts
        lines.append(
            f"{m.name:<36} {m.outcome:<19} {m.exit_code if m.exit_code is not None else '-':>4} "
            f"{c.get('cases run', 0):>3}/{c.get('cases in file', 0):<3} {c.get('different', 0):>6} "
            f"{c.get('new wrong', 0):>9} {c.get('old wrong', 0):>9} {c.get('both legal', 0):>10} "
            f"{c.get('legal in support', 0):>10} {m.seconds:6.1f}  {m.first}"
        )
    n_rep = sum(m.outcome == "reported" or m.outcome.startswith("crashed") for m in rows)
    n_wrong = sum(m.exit_code == 1 for m in rows)
    lines.append(
        f"{n_rep} of {len(rows)} mutants change an output or crash ({n_wrong} with a new answer wrong)"
    )
    return "\n".join(lines)
