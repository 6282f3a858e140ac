"""The regression corpus: self-contained case files that CI replays on every run.

A corpus entry is one JSON file under ``tests/regressions/`` (schema ``specfuzz-regression/1``,
docs/interfaces.md section 6) holding a ``harness.generation.cases.Case`` and where it came from: a confirmed
fuzz failure (``save_failure``) or one of BUGS.md's degenerate inputs (``degenerate_seeds``).
``python -m harness replay PATH... --kernel SPEC`` rebuilds each case on the device under test and
runs the per-case properties on it; exit 0 when every entry passes, 1 when any fails.
``replay --case JSON --only NAME`` does the same for one case given on the command line (the
foreground reproduction of a ``crash`` / ``hang`` finding adds ``--in-process``). Kernel calls run in
a supervised worker unless ``--in-process`` (harness/execution/supervisor.py): a crashing entry is a failure
of
that entry, and the replay goes on.

File names are ``<name>.json`` where the name of a saved failure is derived from its failure key and
a hash of its case, so saving the same failure twice writes the same file (idempotent).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from harness.generation.cases import Case, encode_tensor

SCHEMA = "specfuzz-regression/1"
CORPUS_DIR = Path(__file__).resolve().parents[2] / "tests" / "regressions"


@dataclass
class Entry:
    """One corpus file."""

    name: str
    origin: str
    case: Case
    bug_class: str = ""
    properties: list[str] = field(default_factory=list)  # empty: every layer 1-3 per-case property
    failure: dict | None = None
    # Non-empty: a confirmed, not yet fixed bug (the ledger of known failures). Replay still runs it;
    # CI expects it to fail and fails loudly once it passes, so the mark is removed with the fix.
    known_failure: str = ""
    # Defects of outside kernels, by kernel name (e.g. "vllm-0.33-mrv2"): the write-up that classifies
    # the failure (docs/findings/). Replay on that kernel reports a reproduced failure as KNOWN (not a
    # failure of the run) and a pass as a note (some defects reproduce on one device only); on every
    # other kernel the entry is an ordinary regression case.
    known_defects: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = {
            "schema": SCHEMA,
            "name": self.name,
            "origin": self.origin,
            "bug_class": self.bug_class,
            "properties": list(self.properties),
            "failure": self.failure,
            "case": self.case.to_dict(),
        }
        if self.known_failure:
            d["known_failure"] = self.known_failure
        if self.known_defects:
            d["known_defects"] = dict(self.known_defects)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"corpus entry schema {d.get('schema')!r} is not {SCHEMA!r}")
        return cls(
            name=d["name"],
            origin=d.get("origin", ""),
            case=Case.from_dict(d["case"]),
            bug_class=d.get("bug_class", ""),
            properties=list(d.get("properties") or []),
            failure=d.get("failure"),
            known_failure=d.get("known_failure", ""),
            known_defects=dict(d.get("known_defects") or {}),
        )


def load_entry(path: str | Path) -> Entry:
    return Entry.from_json(json.loads(Path(path).read_text()))


def corpus_files(paths: list[str | Path] | None = None) -> list[Path]:
    """The ``*.json`` files named, or found in the directories named (default: the corpus)."""
    files: list[Path] = []
    for p in map(Path, paths or [CORPUS_DIR]):
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    return files


def write_entry(entry: Entry, directory: str | Path = CORPUS_DIR) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{entry.name}.json"
    path.write_text(json.dumps(entry.to_json(), indent=1, sort_keys=False) + "\n")
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def failure_entry_name(property_name: str, failure: dict, case: dict) -> str:
    """Stable name: property, class, field (indices dropped) and 8 hex digits of the case's hash."""
    digest = hashlib.sha256(json.dumps(case, sort_keys=True).encode()).hexdigest()[:8]
    first = str(failure.get("first_field", "")).split("[", 1)[0]
    return _slug(f"{property_name}-{failure.get('class', '')}-{first}") + f"-{digest}"


def save_failure(property_name: str, failure: dict, command: str, directory: str | Path = CORPUS_DIR) -> Path:
    """Save a confirmed failure (report-schema dict with a ``case``) as a corpus entry; returns its path."""
    case = failure["case"]
    entry = Entry(
        name=failure_entry_name(property_name, failure, case),
        origin=f"found by: {command}",
        case=Case.from_dict(case),
        bug_class=str(failure.get("class", "")),
        properties=[property_name],
        failure={k: failure.get(k) for k in ("class", "first_field", "message")},
    )
    return write_entry(entry, directory)


# ----------------------------------------------------------------------------------------------------
# The degenerate inputs listed at the end of BUGS.md (plus the neighbours they imply)
# ----------------------------------------------------------------------------------------------------
def _explicit(
    vocab: int,
    draft_lens: list[int],
    temps: list[float],
    target: np.ndarray,
    draft: np.ndarray | None,
    ids: list[int],
    method: str,
    seed: int,
) -> Case:
    """A case whose logits are given verbatim (float32), not drawn from a family."""
    tensors = {
        "target_logits": encode_tensor(torch.from_numpy(target.astype(np.float32))),
        "draft_logits": None if draft is None else encode_tensor(torch.from_numpy(draft.astype(np.float32))),
        "draft_token_ids": encode_tensor(torch.tensor(ids, dtype=torch.int64)),
    }
    n = len(draft_lens)
    return Case(
        vocab_size=vocab,
        draft_lens=draft_lens,
        temperatures=temps,
        seeds=[seed + r for r in range(n)],
        positions=[100 * r for r in range(n)],
        family="explicit",
        has_draft_logits=draft is not None,
        method=method,
        tensors=tensors,
    )


def _family(
    vocab: int,
    draft_lens: list[int],
    temps: list[float],
    family: str,
    method: str,
    data_seed: int,
    *,
    scale: float = 1.0,
    has_draft_logits: bool = True,
    positions: list[int] | None = None,
) -> Case:
    n = len(draft_lens)
    return Case(
        vocab_size=vocab,
        draft_lens=draft_lens,
        temperatures=temps,
        seeds=[data_seed * 7 + r for r in range(n)],
        positions=positions or [17 * r for r in range(n)],
        family=family,
        scale=scale,
        has_draft_logits=has_draft_logits,
        data_seed=data_seed,
        method=method,
    )


def _one_hot_rows(vocab: int, hot: list[int]) -> np.ndarray:
    rows = np.full((len(hot), vocab), -np.inf)
    rows[np.arange(len(hot)), hot] = 0.0
    return rows


def degenerate_seeds() -> list[Entry]:
    """BUGS.md's "degenerate inputs that found bugs before", as corpus entries."""
    origin = "BUGS.md degenerate inputs"
    entries: list[Entry] = []
    add = lambda name, case, cls="": entries.append(Entry(name, origin, case, cls))

    for i, vocab in enumerate((1, 2, 111, 8193, 10000, 151936, 262144)):
        method = ("token", "block")[i % 2]
        big = vocab > 10000
        add(
            f"degenerate-vocab-{vocab}-{method}",
            _family(vocab, [1] if big else [3, 0], [1.0] if big else [1.0, 0.0], "gaussian", method, 10 + i),
            "BUGS#10",
        )
    for method in ("token", "block"):
        add(f"degenerate-p-equals-q-{method}", _family(16, [4, 2], [1.0, 0.7], "equal", method, 3), "BUGS#20")
        # One-hot target equal to the one-hot draft at every position: every draft must be accepted.
        hot = [5, 2, 7, 1]
        target = _one_hot_rows(8, hot)
        add(
            f"degenerate-one-hot-target-equals-draft-{method}",
            _explicit(8, [3], [1.0], target, target[:3].copy(), hot[:3], method, 41),
            "BUGS#20",
        )
        add(
            f"degenerate-disjoint-supports-{method}",
            _family(32, [3, 1], [1.0, 2.0], "disjoint", method, 5),
            "BUGS#8",
        )
        add(
            f"degenerate-target-zero-on-draft-{method}",
            _family(16, [4], [1.0], "target_zero", method, 6),
            "BUGS#8",
        )
        add(
            f"degenerate-target-zero-point-mass-{method}",
            _family(16, [4], [1.0], "target_zero", method, 7, has_draft_logits=False),
            "BUGS#8",
        )
        add(
            f"degenerate-huge-logits-{method}", _family(64, [3, 2], [1.0, 1e-8], "huge", method, 8), "BUGS#13"
        )
    # All -inf but one logit, in target and draft rows (different survivors): a certain rejection whose
    # residual is the target's single survivor.
    vocab = 50
    t_hot, d_hot = [7, 3, 11], [9, 3]
    add(
        "degenerate-all-neg-inf-but-one-token",
        _explicit(
            vocab, [2], [1.0], _one_hot_rows(vocab, t_hot), _one_hot_rows(vocab, d_hot), d_hot, "token", 51
        ),
        "BUGS#9",
    )
    add(
        "degenerate-all-neg-inf-but-one-block",
        _explicit(
            vocab, [2], [1.0], _one_hot_rows(vocab, t_hot), _one_hot_rows(vocab, d_hot), d_hot, "block", 52
        ),
        "BUGS#9",
    )
    add(
        "degenerate-k0-all-requests",
        _family(33, [0, 0, 0], [1.0, 0.0, 0.5], "gaussian", "token", 9),
        "BUGS#18",
    )
    add(
        "degenerate-one-long-beside-many-empty",
        _family(20, [16, 0, 0, 0, 0, 0, 0, 0], [1.0] * 8, "zipf", "block", 11),
        "BUGS#17",
    )
    add("degenerate-greedy-exact-ties", _family(12, [3, 2], [0.0, 0.0], "ties", "token", 12), "BUGS#12")
    add(
        "degenerate-all-negative-logits-odd-vocab",
        _family(1025, [2], [1.0], "all_negative", "block", 13),
        "BUGS#10",
    )
    add(
        "degenerate-positions-straddle-2-32",
        _family(9, [3, 3], [1.0, 1.0], "gaussian", "token", 14, positions=[2**32 - 2, 2**32 + 5]),
        "BUGS#17",
    )
    add(
        "degenerate-tiny-temperature-mixed-greedy",
        _family(40, [2, 2, 1], [1e-8, 0.0, 1e-6], "gaussian", "block", 15),
        "BUGS#13",
    )
    return entries


# ----------------------------------------------------------------------------------------------------
# Replay
# ----------------------------------------------------------------------------------------------------
@dataclass
class ReplayOutcome:
    """One corpus entry replayed: findings per property, or why it did not apply to this kernel."""

    path: str
    name: str
    findings: list = field(default_factory=list)  # (property name, Finding)
    properties_run: list = field(default_factory=list)
    not_applicable: str = ""
    seconds: float = 0.0
    known_failure: str = ""
    known_defect: str = ""  # this kernel's classified defect (Entry.known_defects): failing is expected

    @property
    def failed(self) -> bool:
        return bool(self.findings)


def unclaimed_features(kernel: object, case: Case) -> list[str]:
    """What the case needs that the kernel does not claim (such an entry is not applicable)."""
    from harness.contract import capabilities_of

    caps = capabilities_of(kernel)
    missing = []
    if case.method not in getattr(kernel, "methods", ()):
        missing.append(f"method {case.method}")
    if not case.has_draft_logits and not caps.point_mass_drafts:
        missing.append("point-mass drafts")
    if case.has_draft_logits and not caps.draft_logits and max(case.draft_lens, default=0) > 0:
        missing.append("draft logits")
    if any(t == 0.0 for t in case.temperatures) and not caps.greedy:
        missing.append("greedy rows")
    low = [t for t in case.temperatures if 0.0 < t < caps.min_temperature]
    if low:
        missing.append(f"temperatures {low} (its domain starts at {caps.min_temperature:g})")
    if not any(str(d).endswith(case.dtype) for d in caps.dtypes):
        missing.append(f"dtype {case.dtype}")
    if case.vocab_size > caps.max_vocab:
        missing.append(f"V={case.vocab_size} > max_vocab {caps.max_vocab}")
    if case.draft_lens and max(case.draft_lens) > caps.max_draft_len:
        missing.append(f"draft length {max(case.draft_lens)} > {caps.max_draft_len}")
    if case.max_chunk_bytes is not None and not caps.chunking:
        missing.append("chunk budgets")
    if case.want_logprobs and not caps.logprobs:
        missing.append("logprobs")
    return missing


def ordinary_case_properties() -> list[str]:
    """Per-case properties of layers 1-3: those that judge an ordinary, well-formed case as given.

    Layer-5 properties judge the malformed or degenerate variants they build themselves, so an entry
    runs them only when it names them (an entry saved from a layer-5 failure does).
    """
    from harness.properties import REGISTRY
    from harness.properties.case_property import CaseProperty

    return [p.name for p in REGISTRY.values() if isinstance(p, CaseProperty) and p.layer in (1, 2, 3)]


def admits(property_name: str, kernel: object, ctx, case: Case) -> bool:
    """Whether a case lies in the part of the fuzz space the property narrows its search to.

    Only the fields the property narrows (where its ``space`` differs from the kernel's whole space,
    e.g. ``max_draft=1`` for the g == 1 identity, ``families=("equal",)``) are checked; sizes are not,
    so a large corpus case still replays under a small profile.
    """
    from harness.generation.strategies import CaseSpace, temperature_band
    from harness.properties import REGISTRY

    prop = REGISTRY[property_name]
    whole = CaseSpace.for_kernel(ctx.profile, kernel)
    narrow = prop.space(kernel, ctx) if hasattr(prop, "space") else whole
    k = case.draft_lens or [0]
    checks = {
        "max_draft": max(k) <= narrow.max_draft,
        "min_draft": min(k) >= narrow.min_draft,
        "max_reqs": len(case.draft_lens) <= narrow.max_reqs,
        "max_vocab": case.vocab_size <= narrow.max_vocab,
        "methods": case.method in narrow.methods,
        "dtypes": case.dtype in narrow.dtypes,
        "families": case.family in narrow.families
        or case.family == "explicit"
        and "explicit" in narrow.families,
        "temperature_bands": all(temperature_band(t) in narrow.temperature_bands for t in case.temperatures),
        "draft_logits": case.has_draft_logits in narrow.draft_logits,
    }
    return all(ok for name, ok in checks.items() if getattr(narrow, name) != getattr(whole, name))


def replay_entry(path: str | Path, kernel: object, ctx, only: list[str] | None = None) -> ReplayOutcome:
    """Rebuild the entry's case and run its per-case properties (``only``, else the ones it names,
    else all of them)."""
    return replay(load_entry(path), str(path), kernel, ctx, only)


def replay(entry: Entry, where: str, kernel: object, ctx, only: list[str] | None = None) -> ReplayOutcome:
    """``replay_entry`` for an entry already in hand (a file's, or one built from ``--case``)."""
    import time

    from harness.runner import run_case

    outcome = ReplayOutcome(where, entry.name, known_failure=entry.known_failure)
    outcome.known_defect = entry.known_defects.get(getattr(kernel, "name", ""), "")
    missing = unclaimed_features(kernel, entry.case)
    if missing:
        outcome.not_applicable = "kernel does not claim " + ", ".join(missing)
        return outcome
    started = time.perf_counter()
    names = only or entry.properties or ordinary_case_properties()
    names = [n for n in names if admits(n, kernel, ctx, entry.case)]
    for name, check in run_case(kernel, entry.case, ctx, names):
        if check.skipped:
            continue
        outcome.properties_run.append(name)
        outcome.findings.extend((name, f) for f in check.findings)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _cmd_replay(args) -> int:
    import torch

    from harness.contract import KernelNotReady, prepare_kernel
    from harness.execution.supervisor import close, profile_with_limits, supervise
    from harness.plugins import PluginError, load_kernel
    from harness.profiles import PROFILES, active_profile_name
    from harness.properties.base import RunContext

    try:
        kernel = load_kernel(args.kernel)
        prepare_kernel(kernel)
        files = [] if args.case else corpus_files(args.paths)
    except (PluginError, KernelNotReady) as exc:
        print(f"replay: {exc}")
        return 2
    if not files and not args.case:
        print("replay: no corpus files found")
        return 2
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    profile = profile_with_limits(PROFILES[args.profile or active_profile_name()], args)
    ctx = RunContext(profile, device, args.seed, kernel_spec=args.kernel)
    kernel = supervise(kernel, args.kernel, profile, args.in_process)
    try:
        return _replay_all(args, files, kernel, ctx)
    finally:
        close(kernel)


def _inline_entry(text: str) -> Entry:
    return Entry(name="case-from-command-line", origin="--case", case=Case.from_dict(json.loads(text)))


def _replay_all(args, files: list[Path], kernel, ctx) -> int:
    failed = applicable = known = 0
    for path in files or ["--case"]:
        try:
            if args.case:
                out = replay(_inline_entry(args.case), "--case", kernel, ctx, args.only)
            else:
                out = replay_entry(path, kernel, ctx, args.only)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            print(f"BROKEN  {path}: {exc}")
            failed += 1
            continue
        if out.not_applicable:
            print(f"N/A     {out.name}: {out.not_applicable}")
            continue
        applicable += 1
        if out.failed and out.known_defect:
            known += 1
            print(f"KNOWN   {out.name}: a defect of {kernel.name} ({out.known_defect})")
            for prop, f in out.findings:
                print(f"        [{prop}] {f.cls} at {f.first_field}: {f.message[:200]}")
        elif out.failed:
            failed += 1
            for prop, f in out.findings:
                print(f"FAIL    {out.name} [{prop}] {f.cls} at {f.first_field}: {f.message[:200]}")
            if out.known_failure:
                print(f"        (known failure: {out.known_failure})")
        else:
            note = ""
            if out.known_failure:
                note = "  <- marked known_failure: remove the mark"
            elif out.known_defect:
                note = f"  <- a known defect of {kernel.name}, not reproduced here ({out.known_defect})"
            print(f"pass    {out.name} ({len(out.properties_run)} properties, {out.seconds:.1f} s){note}")
    entries = len(files) or 1
    print(
        f"replay: {applicable} applicable entries of {entries}, {failed} failed, {known} known defects "
        f"of this kernel reproduced (kernel {args.kernel})"
    )
    return 1 if failed else 0


def _cmd_corpus(args) -> int:
    if args.action == "seed":
        for entry in degenerate_seeds():
            print(write_entry(entry, args.dir))
        return 0
    for path in corpus_files([args.dir]):
        e = load_entry(path)
        print(f"{e.name:<52} {e.bug_class:<10} {e.case.summary()}")
    return 0


def add_cli(subparsers) -> None:
    """``replay PATH... --kernel SPEC`` and ``corpus seed|list``."""
    from harness.execution.supervisor import add_supervision_args
    from harness.plugins import DEFAULT_KERNEL_SPEC

    p = subparsers.add_parser("replay", help="rerun regression corpus entries against a kernel")
    p.add_argument("paths", nargs="*", help="case files or directories (default: tests/regressions)")
    p.add_argument("--kernel", default=DEFAULT_KERNEL_SPEC)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None)
    p.add_argument("--profile", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", default=None, metavar="JSON", help="replay this one case instead of files")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="run only these properties")
    add_supervision_args(p)
    p.set_defaults(func=_cmd_replay)
    c = subparsers.add_parser("corpus", help="write the BUGS.md degenerate seeds, or list the corpus")
    c.add_argument("action", choices=("seed", "list"))
    c.add_argument("--dir", default=str(CORPUS_DIR))
    c.set_defaults(func=_cmd_corpus)
