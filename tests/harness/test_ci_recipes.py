"""The CI recipes (.github/workflows/*.yml, bench/premerge.sh, docs/ci.md) stay in step with the CLI.

Every ``python -m harness SUB ...`` command in a workflow's ``run:`` steps, in bench/premerge.sh and
in docs/ci.md's bash blocks is parsed by the real parser (``harness.cli.build_parser``) after
``${{ ... }}`` expressions are replaced: ``matrix.X`` by each value of the job's matrix, anything
else by a placeholder. A command must name an existing subcommand, spell every option exactly as
that subcommand defines it (argparse would accept an abbreviation such as ``--rep``; a recipe must
not rely on it), and parse (types, choices, required options). Fuzz shards must be valid ``I/N``
and cover every shard of their campaign once; budgets must be durations.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
import yaml

from harness.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PREMERGE = WORKFLOWS / "gpu-premerge.yml"
NIGHTLY = WORKFLOWS / "nightly-fuzz.yml"
SHELL_SCRIPT = ROOT / "bench" / "premerge.sh"
CI_DOC = ROOT / "docs" / "ci.md"

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
OPERATORS = ";&|<>()"
PLACEHOLDER = "0"  # an int, a path and a string at once


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


def subparsers_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("harness.cli.build_parser has no subcommands")


def load_workflow(path: Path) -> dict:
    return load_workflow_text(path.read_text())


def load_workflow_text(text: str) -> dict:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict), "a workflow is a YAML mapping"
    if True in doc:  # YAML 1.1 reads the key `on` as the boolean true
        doc["on"] = doc.pop(True)
    return doc


def substitute(script: str, matrix: dict[str, object]) -> str:
    def value(m: re.Match) -> str:
        expr = m.group(1)
        if expr.startswith("matrix."):
            key = expr.split(".", 1)[1]
            assert key in matrix, f"${{{{ {expr} }}}} but the job's matrix has no {key!r}"
            return str(matrix[key])
        return PLACEHOLDER

    return EXPR.sub(value, script)


def harness_commands(script: str) -> list[list[str]]:
    """argv (after ``python -m harness``) of every harness command in a shell script."""
    script = re.sub(r"\\\n", " ", script)  # line continuations
    commands = []
    for line in script.splitlines():
        if "harness" not in line:
            continue
        line = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", line)  # ${PROFILE:-gpu}: the default
        line = re.sub(r"\$(\w+|\{\w+\})", PLACEHOLDER, line)  # any other shell variable
        line = re.sub(r"(?<=\s)\d+(?=[<>])", "", line)  # `2>&1`: the fd is not an argument
        lexer = shlex.shlex(line, posix=True, punctuation_chars=OPERATORS)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
        for i in range(len(tokens) - 2):
            if tokens[i] in ("python", "python3") and tokens[i + 1 : i + 3] == ["-m", "harness"]:
                argv = []
                for token in tokens[i + 3 :]:
                    if set(token) <= set(OPERATORS):  # end of the command: ; && || | > ( )
                        break
                    argv.append(token)
                commands.append(argv)
    return commands


def matrix_combinations(job: dict) -> list[dict[str, object]]:
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    combos: list[dict[str, object]] = [{}]
    for key, values in matrix.items():
        if key in ("include", "exclude"):
            continue
        combos = [dict(c, **{key: v}) for c in combos for v in values]
    return combos


def workflow_commands(doc: dict) -> list[tuple[str, list[str]]]:
    """(where, argv) for each harness command of each run step, once per matrix combination."""
    found = []
    for job_name, job in doc["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            if "run" not in step:
                continue
            for combo in matrix_combinations(job):
                for argv in harness_commands(substitute(step["run"], combo)):
                    found.append((f"job {job_name}, step {step.get('name', i)} {combo or ''}", argv))
    return found


def check_command(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Problems of one ``python -m harness`` argv; empty when the real parser accepts it as written."""
    subs = subparsers_of(parser)
    if not argv or argv[0] not in subs:
        return [f"unknown subcommand {argv[:1]} (known: {sorted(subs)})"]
    sub = subs[argv[0]]
    known = {opt for action in sub._actions for opt in action.option_strings}
    problems = [
        f"{argv[0]}: option {tok.split('=', 1)[0]} is not one of {sorted(known)}"
        for tok in argv[1:]
        if tok.startswith("-") and not re.fullmatch(r"-\d.*", tok) and tok.split("=", 1)[0] not in known
    ]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(argv)
    except SystemExit:
        return problems + [f"{argv[0]}: the parser refuses it: {err.getvalue().strip().splitlines()[-1]}"]
    from harness.campaigns.fuzz import UsageError, parse_duration, parse_shard

    checks = {"fuzz": ((parse_duration, "budget"), (parse_shard, "shard")),
              "check": ((parse_duration, "budget"),)}
    for check, name in checks.get(argv[0], ()):
        value = getattr(args, name)
        try:
            if value is not None:  # check's --budget is optional
                check(value)
        except UsageError as exc:
            problems.append(f"{argv[0]}: {exc}")
    return problems


def assert_commands_valid(parser, commands: list[tuple[str, list[str]]]) -> None:
    bad = [
        f"{where}: python -m harness {shlex.join(argv)}: {p}"
        for where, argv in commands
        for p in check_command(parser, argv)
    ]
    assert not bad, "\n".join(bad)


# -- the workflows -------------------------------------------------------------------------------


def test_premerge_workflow_triggers_and_steps(parser):
    doc = load_workflow(PREMERGE)
    pr = doc["on"]["pull_request"]
    assert {"kernels/**", "harness/**", "reference/**"} <= set(pr["paths"])
    (job,) = doc["jobs"].values()
    assert {"self-hosted", "gpu"} <= set(job["runs-on"])
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "pip install --no-deps -e ." in runs
    subcommands = [argv[0] for _, argv in workflow_commands(doc)]
    for sub in ("check", "replay", "record", "diff"):
        assert sub in subcommands, f"gpu-premerge runs no `harness {sub}`"
    uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and uploads[-1]["with"]["path"].rstrip("/") == "out"
    assert str(uploads[-1].get("if")) == "always()", "reports must be uploaded when a check fails"


def test_nightly_workflow_triggers_and_jobs(parser):
    doc = load_workflow(NIGHTLY)
    assert doc["on"]["schedule"][0]["cron"]
    jobs = doc["jobs"]
    assert set(jobs) >= {"fuzz", "merge", "golden"}
    assert jobs["merge"]["needs"] in ("fuzz", ["fuzz"])
    commands = workflow_commands(doc)
    shards = [a for w, a in commands if w.startswith("job fuzz") and a[0] == "fuzz"]
    assert len(shards) == len(jobs["fuzz"]["strategy"]["matrix"]["shard"])
    # every shard I/N of one campaign, each once, all with one seed
    from harness.campaigns.fuzz import parse_shard

    parsed = [parser.parse_args(a) for a in shards]
    got = sorted(parse_shard(a.shard) for a in parsed)
    n = got[0][1]
    assert got == [(i, n) for i in range(n)], f"shards {got} do not cover 0..{n - 1} of {n} once each"
    assert len({a.seed for a in parsed}) == 1 and parsed[0].seed is not None, "shards need one shared --seed"
    # the merge job downloads what the fuzz job uploads, merges it and renders the HTML it uploads
    up = next(s for s in jobs["fuzz"]["steps"] if "upload-artifact" in str(s.get("uses")))
    down = next(s for s in jobs["merge"]["steps"] if "download-artifact" in str(s.get("uses")))
    pattern = re.escape(down["with"]["pattern"]).replace(r"\*", ".*")
    assert re.fullmatch(pattern, substitute(up["with"]["name"], {"shard": 0}))
    merge_subs = [a[0] for w, a in commands if w.startswith("job merge")]
    assert merge_subs == ["merge", "html"]
    html_up = next(s for s in jobs["merge"]["steps"] if "upload-artifact" in str(s.get("uses")))
    assert "report.html" in html_up["with"]["path"]
    assert any(a[0] == "record" for w, a in commands if w.startswith("job golden"))


@pytest.mark.parametrize("path", [PREMERGE, NIGHTLY], ids=lambda p: p.name)
def test_workflow_commands_parse(parser, path):
    commands = workflow_commands(load_workflow(path))
    assert commands, f"{path.name} runs no harness command"
    assert_commands_valid(parser, commands)


def test_shell_recipes_parse(parser):
    commands = [(SHELL_SCRIPT.name, argv) for argv in harness_commands(SHELL_SCRIPT.read_text())]
    blocks = re.findall(r"```bash\n(.*?)```", CI_DOC.read_text(), flags=re.S)
    commands += [
        (f"{CI_DOC.name} block {i}", argv) for i, b in enumerate(blocks) for argv in harness_commands(b)
    ]
    subs = {argv[0] for _, argv in commands}
    assert {"check", "replay", "record", "diff", "fuzz", "merge", "html"} <= subs
    assert_commands_valid(parser, commands)


def test_docs_link_the_related_pages():
    text = CI_DOC.read_text()
    for target in ("vllm.md", "premerge.md"):
        assert f"({target})" in text, f"docs/ci.md does not link {target}"


# -- the validator catches what it should -----------------------------------------------------------

BAD_WORKFLOW = """
name: bad
on: {pull_request: {paths: ["kernels/**"]}}
jobs:
  fuzz:
    runs-on: [self-hosted, gpu]
    strategy: {matrix: {shard: [1, 2]}}
    steps:
      - run: |
          python -m harness check --profile gpu --reprot out/check
          python -m harness chek --profile gpu
          python -m harness check --rep out/check
          python -m harness check --profile huge
          python -m harness check --budget soon
          python -m harness fuzz --budget 2hours --shard ${{ matrix.shard }}/2 --report out/s 2>&1 | tee log
          python -m harness record --kernel K --profile gpu
"""


def test_validator_rejects_a_bad_workflow(parser):
    problems = [
        p
        for _, argv in workflow_commands(load_workflow_text(BAD_WORKFLOW))
        for p in check_command(parser, argv)
    ]
    text = "\n".join(problems)
    assert "option --reprot is not one of" in text  # misspelled flag
    assert "unknown subcommand ['chek']" in text  # misspelled subcommand
    assert "option --rep is not one of" in text  # an abbreviation argparse alone would accept
    assert "invalid choice: 'huge'" in text  # a choice the parser does not have
    assert "fuzz: budget '2hours' is not a duration" in text
    assert "check: budget 'soon' is not a duration" in text
    assert "shard '2/2' needs 0 <= I < N" in text  # a 1-based matrix
    assert "the following arguments are required: --out" in text


GOOD_WORKFLOW = """
on: {schedule: [{cron: "0 1 * * *"}]}
jobs:
  fuzz:
    strategy: {matrix: {shard: [0, 1]}}
    steps:
      - run: |
          python -m harness fuzz --budget 90s --shard ${{ matrix.shard }}/2 --seed ${{ github.run_id }} \\
            --report out/s-${{ matrix.shard }} 2>&1 | tee log  # python -m harness fuzz --bad
"""


def test_validator_accepts_good_commands(parser):
    commands = workflow_commands(load_workflow_text(GOOD_WORKFLOW))
    assert [a[:5] for _, a in commands] == [["fuzz", "--budget", "90s", "--shard", f"{i}/2"] for i in (0, 1)]
    assert_commands_valid(parser, commands)


def test_harness_commands_splitting():
    script = (
        "set -e\npython -m harness diff --against g.json.gz \\\n  --kernel K --json d.json | tee d.txt\n"
        "code=$?; python -m harness html r.json -o r.html && echo ok  # python -m harness nope\n"
    )
    assert harness_commands(script) == [
        ["diff", "--against", "g.json.gz", "--kernel", "K", "--json", "d.json"],
        ["html", "r.json", "-o", "r.html"],
    ]
