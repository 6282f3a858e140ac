"""pytest configuration shared by every suite.

- Selects compiled Triton or the CPU interpreter BEFORE triton is imported anywhere
  (``TRITON_INTERPRET=1`` when no CUDA device is present).
- Registers the Hypothesis profiles of ``harness.profiles`` and loads the active one.
"""

from __future__ import annotations

import kernels._device  # noqa: F401  (must precede every triton import)
from hypothesis import settings

from harness.profiles import active_profile_name, register_hypothesis_profiles

register_hypothesis_profiles()
settings.load_profile(active_profile_name())
