"""Every property module, imported so that each registers itself in ``base.REGISTRY``.

Order of registration is the order the runner uses: cheapest and sharpest first (DESIGN.md layers).
The statistical modules (layer 4, every ``statistical*`` module of this package) are imported when
present. A module that fails to import does not take the harness down: its error is kept in
``IMPORT_ERRORS`` and the runner reports it as a property in error.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback

from harness.properties.base import REGISTRY, register  # noqa: F401

_CORE_IN_ORDER = ("structural", "law_consequences", "coupled", "invariance", "layout_reuse", "bad_input")
IMPORT_ERRORS: dict[str, str] = {}


def _import(name: str) -> None:
    try:
        importlib.import_module(f"harness.properties.{name}")
    except Exception as exc:  # noqa: BLE001 -- reported by the runner, never fatal
        IMPORT_ERRORS[name] = f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=3)


def _import_all() -> None:
    present = {info.name for info in pkgutil.iter_modules(__path__)}
    for name in _CORE_IN_ORDER:
        if name in present:
            _import(name)
        else:
            IMPORT_ERRORS[name] = f"module harness.properties.{name} is missing"
    for name in sorted(n for n in present if n.startswith("statistical")):
        _import(name)


_import_all()
