"""A pytest plugin (``-p tests.harness.fast_shrink``) for tests that run pytest in a subprocess on a
faulting kernel: the ci profile's shrink budget is cut to ``test_faults.SHRINK_S`` seconds."""

from dataclasses import replace

from harness.profiles import PROFILES
from tests.harness.test_faults import SHRINK_S

PROFILES["ci"] = replace(PROFILES["ci"], shrink_seconds=SHRINK_S)
