"""Triton's CPU interpreter patches ``triton.language`` once per launch, not once per helper call.

Under ``TRITON_INTERPRET=1`` a launch (``GridExecutor``) patches ``triton.language`` (and
``triton.language.core``) with interpreter builtins for the duration of the launch, then restores
them. Every call of a ``@triton.jit`` *helper* inside the launch (``InterpretedFunction.__call__``)
patches the same modules again and never restores that scope: ``inspect.getmembers`` over
``tl``, ``tl.tensor`` and ``tl.math`` each time, about 0.26 ms a call. Our kernels call helpers
(Philox rounds, wide multiplies, row-statistics combines) thousands of times per launch, so on a
2-core CPU that re-patching was 37 % of a verification's time (triton 3.9, measured with cProfile on
the statistical layer's requests).

``install()`` wraps the interpreter's ``_patch_lang`` so that a call made while every language
module the function sees is already patched returns an empty scope instead of patching again. That
is exactly the state the re-patch would produce: builtins already replaced are not builtins any more
(``_patch_builtin`` skips them) and the core and tensor patches set the same values; the launch's own
scope still restores everything when the launch ends. Only the interpreter is touched; compiled
Triton never calls ``_patch_lang``. When the interpreter's internals are not what this expects (a
different Triton version), nothing is installed and interpretation runs at Triton's own speed.
``tests/kernels/test_interpreter_patching.py`` checks both that outputs are bit-identical with and
without it and that it engages.
"""

from __future__ import annotations

import inspect
from collections import Counter

_INSTALLED = {"on": False, "original": None}
_active: Counter = Counter()  # language module id -> patch scopes applied and not yet restored


class _EmptyScope:
    """What a redundant patch returns: nothing to restore."""

    def restore(self) -> None:
        return None


_langs_of: dict = {}  # function -> the language modules its globals name (the same test as Triton's)


def _language_modules(fn, tl) -> tuple:
    langs = _langs_of.get(fn)
    if langs is None:
        langs = _langs_of[fn] = tuple(v for v in fn.__globals__.values()
                                      if inspect.ismodule(v) and v in (tl, tl.core))
    return langs


def install() -> bool:
    """Install the wrapper (module docstring); True when it is active after the call."""
    if _INSTALLED["on"]:
        return True
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if original is None or scope_type is None or not hasattr(scope_type, "restore"):
        return False
    if list(inspect.signature(original).parameters) != ["fn"]:
        return False

    def patch_lang(fn):
        langs = _language_modules(fn, tl)
        if langs and all(_active[id(m)] > 0 for m in langs):
            return _EmptyScope()
        scope = _INSTALLED["original"](fn)
        for m in langs:
            _active[id(m)] += 1
        restore = scope.restore

        def restore_and_count() -> None:
            restore()
            for m in langs:
                _active[id(m)] -= 1

        scope.restore = restore_and_count
        return scope

    interpreter._patch_lang = patch_lang
    _INSTALLED.update(on=True, original=original)
    return True


def uninstall() -> None:
    """Put Triton's own ``_patch_lang`` back (tests compare both)."""
    if not _INSTALLED["on"]:
        return
    from triton.runtime import interpreter

    interpreter._patch_lang = _INSTALLED["original"]
    _INSTALLED.update(on=False, original=None)
    _active.clear()


def installed() -> bool:
    return _INSTALLED["on"]
