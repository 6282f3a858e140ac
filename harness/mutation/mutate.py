"""Mutation testing: the harness's own score against the catalogue in ``harness.mutation.catalogue``.

``python -m harness mutate [--profile ci|gpu] [--only NAME ...] [--fast] [--jobs N] [--report DIR]``

For each mutant: copy ``kernels/`` to a fresh temporary directory, apply the mutant's text edit (its
anchor must occur exactly once), and run ``python -m harness check`` against the copy in a
subprocess with a time limit (the child puts the copy first on ``sys.path`` and refuses to run if
``kernels`` was imported from anywhere else). ``--fail-fast`` makes the child stop at its first
confirmed failure, so the seconds recorded are the time to first failure (process start included).
The child calls the kernel in process (``--in-process``): it is already one process per mutant, a
mutant that crashes it counts as killed, and a supervised worker would add its fork server's start
(~4 s per mutant on a loaded 2-core machine) to every mutant.
``--fuzz SECONDS`` judges each mutant by a fuzz campaign instead (fresh examples round after round,
guided search, stopped at the first confirmed failure, whose ``found_after_s`` is recorded).

Statuses: ``killed`` (the check failed, or its process died from a signal), ``survived`` (it
passed), ``timeout`` (undecided within the limit: NOT counted as killed), ``error`` (the harness
itself could not run: exit 2), ``equivalent`` (argued in the catalogue; not run), ``not run`` (the
``--budget`` was spent). Before any mutant, the unmutated copy runs the same check and must pass, or
the matrix would mean nothing. The score is
killed / (mutants run - equivalent).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.mutation.catalogue import CATALOGUE, Mutant, by_name
from harness.plugins import DEFAULT_KERNEL_SPEC as DEFAULT_KERNEL  # one default for every command

REPO_ROOT = Path(__file__).resolve().parents[2]
KERNELS_DIR = REPO_ROOT / "kernels"
KILLED, SURVIVED, TIMEOUT, ERROR, EQUIVALENT, NOT_RUN = (
    "killed",
    "survived",
    "timeout",
    "error",
    "equivalent",
    "not run",
)

# The child process: mutated copy first on sys.path, proof that it is the copy that got imported,
# then the ordinary CLI. argv: [copy_root, repo_root, *cli_args].
CHILD_SOURCE = r"""
import os, sys
copy_root, repo_root = sys.argv[1], sys.argv[2]
sys.path[:0] = [copy_root, repo_root]
import kernels
where = os.path.realpath(kernels.__file__)
if not where.startswith(os.path.realpath(copy_root) + os.sep):
    sys.stderr.write(f"mutate child: kernels imported from {where}, not from the mutated copy\n")
    sys.exit(2)
from harness.cli import main
sys.exit(main(sys.argv[3:]))
"""


class AnchorError(Exception):
    """A mutant whose anchor does not occur exactly once in the current kernels source."""


@dataclass
class MutantResult:
    name: str
    bug_class: str
    status: str
    killer: str = ""  # first property that failed (or errored)
    failure_class: str = ""
    seconds: float = 0.0  # wall time of the child process (time to first failure under --fail-fast)
    harness_seconds: float = 0.0  # properties' own seconds up to the killer (no start-up, no imports)
    detail: str = ""


@dataclass
class MutationRun:
    profile: str
    seed: int
    kernel: str
    baseline: MutantResult | None = None
    results: list[MutantResult] = field(default_factory=list)

    def judged(self) -> list[MutantResult]:
        """Results that count toward the score: not argued equivalent, and actually run."""
        return [r for r in self.results if r.status not in (EQUIVALENT, NOT_RUN)]

    @property
    def score(self) -> float:
        judged = self.judged()
        return sum(r.status == KILLED for r in judged) / len(judged) if judged else 0.0

    def to_json(self) -> dict:
        return {
            "schema": "specfuzz-mutation/1",
            "profile": self.profile,
            "seed": self.seed,
            "kernel": self.kernel,
            "score": self.score,
            "baseline": asdict(self.baseline) if self.baseline else None,
            "mutants": [asdict(r) for r in self.results],
        }


# ----------------------------------------------------------------------------------------------------
# Applying mutants
# ----------------------------------------------------------------------------------------------------
def anchor_count(mutant: Mutant, kernels_dir: Path = KERNELS_DIR) -> int:
    path = kernels_dir / mutant.file
    if not path.is_file():
        return -1
    return path.read_text().count(mutant.anchor)


def anchor_problems(catalogue=CATALOGUE, kernels_dir: Path = KERNELS_DIR) -> list[str]:
    """Every mutant whose anchor is missing or ambiguous, or that does not change the text."""
    problems = []
    names = set()
    for m in catalogue:
        if m.name in names:
            problems.append(f"{m.name}: duplicate mutant name")
        names.add(m.name)
        if m.anchor == m.replacement:
            problems.append(f"{m.name}: replacement equals anchor (not a mutant)")
        n = anchor_count(m, kernels_dir)
        if n == -1:
            problems.append(f"{m.name}: file kernels/{m.file} does not exist")
        elif n != 1:
            problems.append(
                f"{m.name}: anchor occurs {n} times in kernels/{m.file} (must be exactly once): {m.anchor!r}"
            )
    return problems


def mutated_source(mutant: Mutant, kernels_dir: Path = KERNELS_DIR) -> str:
    text = (kernels_dir / mutant.file).read_text()
    n = text.count(mutant.anchor)
    if n != 1:
        raise AnchorError(
            f"{mutant.name}: anchor occurs {n} times in kernels/{mutant.file}: {mutant.anchor!r}"
        )
    return text.replace(mutant.anchor, mutant.replacement, 1)


def make_copy(dest_root: Path, mutant: Mutant | None, kernels_dir: Path = KERNELS_DIR) -> Path:
    """``dest_root/kernels``: a copy of ``kernels_dir`` with ``mutant`` applied (or none)."""
    target = dest_root / "kernels"
    shutil.copytree(kernels_dir, target, ignore=shutil.ignore_patterns("__pycache__"))
    if mutant is not None:
        (target / mutant.file).write_text(mutated_source(mutant, kernels_dir))
    return target


# ----------------------------------------------------------------------------------------------------
# Running the harness on a copy
# ----------------------------------------------------------------------------------------------------
def check_args(
    kernel: str,
    profile: str,
    seed: int,
    report_dir: Path,
    properties: tuple[str, ...],
    fuzz_s: float | None = None,
    max_examples: int | None = None,
) -> list[str]:
    """The child's CLI: ``check --fail-fast``, or (``fuzz_s``) a fuzz campaign that stops at its
    first confirmed failure (so the report holds the time to first failure)."""
    if fuzz_s:
        args = [
            "fuzz",
            "--kernel",
            kernel,
            "--budget",
            f"{fuzz_s:g}s",
            "--profile",
            profile,
            "--seed",
            str(seed),
            "--report",
            str(report_dir),
            "--no-save",
            "--stop-on-failure",
            "--acceptance-requests",
            "0",
            "--in-process",
        ]
        return args + [x for p in properties for x in ("--only", p)]
    args = [
        "check",
        "--kernel",
        kernel,
        "--profile",
        profile,
        "--seed",
        str(seed),
        "--report",
        str(report_dir),
        "--fail-fast",
        "--in-process",
    ]
    if max_examples:
        args += ["--max-examples", str(max_examples)]
    if properties:
        args += ["--only", *properties]
    return args


def _first_failure(report_path: Path) -> tuple[str, str, float]:
    """(killing property, failure class, harness seconds until it finished) from the child's report."""
    try:
        report = json.loads(report_path.read_text())
    except (OSError, json.JSONDecodeError):
        return "", "", 0.0
    found = [
        (f["found_after_s"], p.get("name", ""), f.get("class", ""))
        for p in report.get("properties", [])
        for f in p.get("failures") or []
        if "found_after_s" in f
    ]
    if found:  # a fuzz report: the earliest failure
        t, name, cls = min(found)
        return name, cls, float(t)
    elapsed = 0.0
    for p in report.get("properties", []):
        elapsed += float(p.get("seconds") or 0.0)
        if p.get("verdict") in ("fail", "error"):
            failures = p.get("failures") or []
            return (
                p.get("name", ""),
                (failures[0].get("class", "") if failures else p.get("verdict", "")),
                elapsed,
            )
    return "", "", elapsed


def run_child(
    root: Path, cli_args: list[str], env_extra: dict | None, timeout_s: float
) -> tuple[int | None, str, float]:
    """``python -m harness CLI_ARGS`` in a child whose ``kernels`` is the copy under ``root``
    (CHILD_SOURCE); returns (exit code, or None when killed at ``timeout_s``; output; seconds)."""
    cmd = [sys.executable, "-c", CHILD_SOURCE, str(root), str(REPO_ROOT), *cli_args]
    env = dict(os.environ, **(env_extra or {}))
    env.pop("PYTHONPATH", None)  # the child sets its own path; nothing may shadow the copy
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: only what we started
        proc.communicate()
        return None, "", time.monotonic() - start
    return proc.returncode, out, time.monotonic() - start


def run_one(
    mutant: Mutant | None,
    *,
    kernel: str = DEFAULT_KERNEL,
    profile: str = "ci",
    seed: int = 0,
    timeout_s: float = 600.0,
    properties: tuple[str, ...] = (),
    env_extra: dict | None = None,
    kernels_dir: Path = KERNELS_DIR,
    fuzz_s: float | None = None,
    max_examples: int | None = None,
) -> MutantResult:
    """Apply ``mutant`` (None: the unmutated baseline) to a temporary copy and run the check on it."""
    name = mutant.name if mutant else "(baseline)"
    bug_class = mutant.bug_class if mutant else ""
    if mutant is not None and mutant.equivalent:
        return MutantResult(name, bug_class, EQUIVALENT, detail=mutant.equivalent)
    with tempfile.TemporaryDirectory(prefix="specfuzz-mutant-") as tmp:
        root = Path(tmp)
        make_copy(root, mutant, kernels_dir)
        report_dir = root / "report"
        code, out, seconds = run_child(
            root,
            check_args(kernel, profile, seed, report_dir, properties, fuzz_s, max_examples),
            env_extra,
            timeout_s,
        )
        if code is None:
            return MutantResult(
                name, bug_class, TIMEOUT, seconds=seconds, detail=f"undecided after {timeout_s:.0f} s"
            )
        killer, failure_class, harness_s = _first_failure(report_dir / "report.json")
    tail = "\n".join((out or "").strip().splitlines()[-5:])
    if code == 0:
        return MutantResult(
            name, bug_class, SURVIVED, seconds=seconds, harness_seconds=harness_s, detail=tail
        )
    if code == 1:
        return MutantResult(name, bug_class, KILLED, killer, failure_class, seconds, harness_s, tail)
    if code < 0:
        # The check process died from a signal (a kernel reading far out of bounds under the CPU
        # interpreter segfaults it): the mutant did not pass unnoticed.
        return MutantResult(
            name,
            bug_class,
            KILLED,
            f"crash (signal {-code})",
            "process_crash",
            seconds,
            harness_s,
            tail,
        )
    return MutantResult(
        name, bug_class, ERROR, killer, failure_class, seconds, harness_s, f"exit {code}: {tail}"
    )


def run_campaign(
    mutants: list[Mutant],
    *,
    kernel: str = DEFAULT_KERNEL,
    profile: str = "ci",
    seed: int = 0,
    timeout_s: float = 600.0,
    fast: bool = False,
    jobs: int = 1,
    gpus: list[str] | None = None,
    baseline: bool = True,
    properties: tuple[str, ...] = (),
    budget_s: float | None = None,
    fuzz_s: float | None = None,
    max_examples: int | None = None,
    progress=print,
) -> MutationRun:
    """Baseline first (must pass), then every mutant.

    ``fast`` runs each mutant against its expected killers only; otherwise every property runs (or
    ``properties``, when given, e.g. to leave the slow statistical layer out of a CPU run).
    """
    problems = anchor_problems(mutants)
    if problems:
        raise AnchorError("catalogue out of sync with kernels/:\n  " + "\n  ".join(problems))
    run = MutationRun(profile, seed, kernel)
    killers = tuple(sorted({k for m in mutants for k in m.killers})) if fast else tuple(properties)
    # Every check of this campaign, the baseline included, runs with the same settings.
    check = functools.partial(
        run_one,
        kernel=kernel,
        profile=profile,
        seed=seed,
        timeout_s=timeout_s,
        fuzz_s=fuzz_s,
        max_examples=max_examples,
    )
    if baseline:
        run.baseline = check(None, properties=killers)
        progress(f"baseline (unmutated kernels): {run.baseline.status} in {run.baseline.seconds:.1f} s")
        if run.baseline.status != SURVIVED:
            raise RuntimeError(
                f"the unmutated kernels do not pass the check ({run.baseline.status}); "
                f"a kill matrix would be meaningless:\n{run.baseline.detail}"
            )

    deadline = None if budget_s is None else time.monotonic() + budget_s

    def job(i_m):
        i, m = i_m
        if deadline is not None and time.monotonic() > deadline:
            return MutantResult(m.name, m.bug_class, NOT_RUN, detail="campaign time budget spent")
        env = {"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else None
        props = m.killers if fast else tuple(properties)
        result = check(m, properties=props, env_extra=env)
        progress(format_row(result))
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        run.results = list(pool.map(job, enumerate(mutants)))
    return run


# ----------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------
def format_row(r: MutantResult) -> str:
    return (
        f"{r.name:<34} {r.bug_class:<22} {r.status:<10} {r.killer or '-':<32} {r.seconds:7.1f} "
        f"{r.harness_seconds:7.1f}"
    )


def kill_matrix(run: MutationRun) -> str:
    lines = [
        f"{'mutant':<34} {'class':<22} {'status':<10} {'killing property':<32} {'wall s':>7} {'check s':>7}"
    ]
    lines += [format_row(r) for r in run.results]
    judged = run.judged()
    killed = sum(r.status == KILLED for r in judged)
    n_equivalent = sum(r.status == EQUIVALENT for r in run.results)
    n_not_run = sum(r.status == NOT_RUN for r in run.results)
    lines.append(
        f"mutation score: {killed}/{len(judged)} = {100 * run.score:.1f}% ({n_equivalent} argued "
        f"equivalent, {n_not_run} not run; profile {run.profile}, seed {run.seed})"
    )
    return "\n".join(lines)


def _cmd_mutate(args) -> int:
    mutants = by_name(args.only) if args.only else list(CATALOGUE)
    if args.fast:
        mutants = [m for m in mutants if m.fast] if not args.only else mutants
    if args.list:
        for m in mutants:
            print(f"{m.name:<34} {m.bug_class:<22} {'fast ' if m.fast else ''}{m.description}")
        return 0
    problems = anchor_problems()
    if problems:
        print("catalogue out of sync with kernels/:\n  " + "\n  ".join(problems))
        return 2
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(
        f"mutate: {len(mutants)} mutants, profile {args.profile}, seed {seed}, "
        f"limit {args.timeout:.0f} s each"
        + (f", properties {' '.join(args.properties)}" if args.properties else "")
    )
    gpus = args.gpus.split(",") if args.gpus else None
    try:
        run = run_campaign(
            mutants,
            kernel=args.kernel,
            profile=args.profile,
            seed=seed,
            timeout_s=args.timeout,
            fast=args.fast,
            jobs=args.jobs,
            gpus=gpus,
            baseline=not args.no_baseline,
            properties=tuple(args.properties),
            budget_s=args.budget,
            fuzz_s=args.fuzz,
            max_examples=args.max_examples,
        )
    except (AnchorError, RuntimeError) as exc:
        print(f"mutate: {exc}")
        return 2
    print(kill_matrix(run))
    if args.report:
        out = Path(args.report)
        out.mkdir(parents=True, exist_ok=True)
        (out / "mutation.json").write_text(json.dumps(run.to_json(), indent=1))
        print(f"wrote {out / 'mutation.json'}")
    return 0 if all(r.status in (KILLED, EQUIVALENT) for r in run.results) else 1


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "mutate", help="mutation testing: apply catalogue mutants to a copy of kernels/"
    )
    p.add_argument("--kernel", default=DEFAULT_KERNEL, help="adapter spec run against the mutated copy")
    p.add_argument("--profile", default="ci")
    p.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run only this mutant (repeatable)"
    )
    p.add_argument(
        "--fast", action="store_true", help="CI subset: fast mutants, each against its killers only"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="root seed for every check (default: fresh, printed)"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant before it is undecided")
    p.add_argument("--jobs", type=int, default=1, help="mutants run side by side")
    p.add_argument("--gpus", default="", help="comma-separated CUDA device ids, assigned round-robin to jobs")
    p.add_argument(
        "--properties",
        nargs="+",
        default=[],
        metavar="NAME",
        help="run only these properties against every mutant (default: all)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds after which no new mutant starts (the rest are reported 'not run')",
    )
    p.add_argument("--max-examples", type=int, default=None, help="passed to check: examples per property")
    p.add_argument(
        "--fuzz",
        type=float,
        default=None,
        metavar="SECONDS",
        help="judge each mutant by a fuzz campaign of this budget that stops at its first failure "
        "(time to first failure under guided search) instead of one check",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated run (not recommended)")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--report", default=None, help="directory for mutation.json")
    p.set_defaults(func=_cmd_mutate)
