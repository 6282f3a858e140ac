"""Hypothesis draws that depend on the seed alone, not on which modules a process has imported.

Hypothesis 6.131 and later replace a drawn integer, float or string, now and then (5 % of draws),
by a constant found in the source of an imported module that is not installed: the working tree's
own ``harness``, ``kernels`` and ``reference`` modules, a user's kernel module. That pool grows with
every import. So one ``@seed`` drew different cases in processes that had imported different
modules, or in one process before and after a lazy import. Measured on the CPU (2026-12-07, seed 11,
ci profile): ``law_consequences`` in ``check --in-process`` and in a bare ``run_properties`` parted at
case 23 of 29, and on an H100 the prewarm's planner (one process per property) missed 23 of the 217
specialisations check's worker launched. It also broke the promise of a report's ``reproduce with:``
line, whose ``--only`` imports fewer modules than the run it repeats.

``pin_draws()`` empties that pool for this process (Hypothesis's own built-in constants stay: they
are the same everywhere) and keeps it empty whatever is imported later. It reaches into
``hypothesis.internal``; a Hypothesis without local constants (before 6.131) needs nothing, and one
whose internals moved is refused loudly by tests/harness/test_seeded_draws.py rather than left
drawing by import order. ``harness.generation.strategies`` pins on import, before any case is drawn.
"""

from __future__ import annotations

_pinned = False


def pin_draws() -> bool:
    """Make this process's Hypothesis draws independent of its imports; True when a pool was pinned
    (False: this Hypothesis has no local constants)."""
    global _pinned
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        return False
    if not hasattr(providers, "_get_local_constants"):
        return False
    if not _pinned:
        empty = Constants()
        providers._get_local_constants = lambda: empty
        cache = getattr(providers, "CONSTANTS_CACHE", None)
        if cache is not None:  # permitted constants computed from the pool before it was pinned
            cache.cache.clear()
        _pinned = True
    return True
