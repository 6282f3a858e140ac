"""One seed draws the same cases whatever a process has imported (harness/generation/seeded_draws.py).

Each check runs in a fresh interpreter: it draws 60 cases of the ci case space from one seed, once
as is and once after importing a module of the working tree's kind (not installed) that is full of
constants. Pinned, the two lists are equal; with Hypothesis's own pool put back (what the tree did
before the pin), the import changes the draws, which shows the check can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRAW = textwrap.dedent("""
    import json, sys
    from hypothesis.internal.conjecture import providers
    hypothesis_pool = getattr(providers, "_get_local_constants", None)
    from harness.generation import seeded_draws
    from harness.generation.strategies import CaseSpace, cases
    from harness.profiles import PROFILES
    from hypothesis import Phase, given, seed, settings
    if sys.argv[1] == "unpinned":
        providers._get_local_constants = hypothesis_pool
    if sys.argv[2] == "import":
        sys.path.insert(0, sys.argv[3])
        import constants_galore  # noqa: F401
    drawn = []
    from harness.adapters.reference_kernel import kernel
    space = CaseSpace.for_kernel(PROFILES["ci"], kernel)

    @seed(20261207)
    @settings(max_examples=60, database=None, phases=[Phase.generate], deadline=None)
    @given(cases(space))
    def draw(case):
        drawn.append(case.to_dict())

    draw()
    print(json.dumps({"pinned": seeded_draws._pinned, "cases": drawn}, default=str))
""")

CONSTANTS = (*range(3, 400, 7), 4093, 12345, 65537, 99991, 2**31 - 3, 2**40 + 7, 0.37, 1e-5, 2.5, 0.0625)
MODULE = "VALUES = [" + ", ".join(str(v) for v in CONSTANTS) + "]\n"


def drawn(mode: str, extra: str, folder) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", DRAW, mode, extra, str(folder)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local_module(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local_code")  # a path Hypothesis counts as the user's own code
    (folder / "constants_galore.py").write_text(MODULE)
    return folder


def test_hypothesis_has_the_pool_the_pin_replaces():
    from hypothesis.internal.conjecture import providers

    import harness.generation.strategies  # noqa: F401  (pins on import)
    from harness.generation import seeded_draws

    assert hasattr(providers, "_get_local_constants"), (
        "this Hypothesis has no local-constants pool: harness/generation/seeded_draws.py has nothing to pin; "
        "check that its draws still do not depend on imports before removing the pin")
    assert seeded_draws._pinned


def test_an_import_does_not_change_pinned_draws(local_module):
    plain, after_import = drawn("pinned", "plain", local_module), drawn("pinned", "import", local_module)
    assert plain["pinned"] and len(plain["cases"]) == 60
    assert after_import["cases"] == plain["cases"]


def test_without_the_pin_an_import_changes_the_draws(local_module):
    plain, after_import = drawn("unpinned", "plain", local_module), drawn("unpinned", "import", local_module)
    assert after_import["cases"] != plain["cases"]
