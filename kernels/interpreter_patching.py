"""Triton's CPU interpreter: patch ``triton.language`` once per launch, not on every helper call.

Under ``TRITON_INTERPRET=1`` a launch (``GridExecutor.__call__``) patches the language modules its
kernel's globals name (``triton.language`` and/or ``triton.language.core``) with interpreter
builtins, and restores them when the launch ends. Every call of a ``@triton.jit`` *helper* inside the
launch (``InterpretedFunction.__call__``) calls ``_patch_lang`` again for the modules the helper's
globals name, and never restores that scope: ``inspect.getmembers`` over ``tl``, ``tl.tensor`` and
``tl.math`` each time, about 0.25 ms a call. Our kernels call helpers (Philox rounds, wide
multiplies, row-statistics combines) thousands of times per launch, so on a 2-core CPU that
re-patching was 37 % of a verification's time (triton 3.9, cProfile of the statistical layer's
requests; docs/findings/triton-interpreter.md).

``install()`` wraps ``GridExecutor.__call__`` and ``_patch_lang``. During a launch it keeps the set
of language modules patched so far: the launch's own, plus those a helper's re-patch added. A helper
call whose modules are all in that set gets an empty scope instead of a re-patch. A re-patch there
would set the same interpreter builtins again: names already replaced are not builtins any more, so
``_patch_builtin`` skips them, and the tensor and core patches set equivalent values. Anything else
goes to Triton's own ``_patch_lang``:
- a helper that names a module not yet patched in this launch (Triton's ``standard.py`` helpers
  name only ``triton.language.core``);
- every call outside a launch.

The set ends with the launch, whose own scope then restores what it patched, as before. Compiled
Triton never calls ``_patch_lang``. When the interpreter's internals are not what this expects (a
different Triton version), nothing is installed and interpretation runs at Triton's own speed.
``tests/kernels/test_interpreter_patching.py`` checks several things:
- outputs are bit-identical with and without it;
- kernels and helpers whose modules name the language differently behave as under Triton's own
  patching;
- it engages.
"""

from __future__ import annotations

import inspect

_INSTALLED: dict = {"on": False, "patch_lang": None, "grid_call": None}
_launches: list = []  # per active launch: ids of the language modules patched in it so far
_pending = [False]  # set by a launch until its own _patch_lang call arrives
_langs_of: dict = {}  # function -> the language modules its globals name (the same test as Triton's)


class _EmptyScope:
    """What a redundant patch returns: nothing to restore."""

    def restore(self) -> None:
        return None


def _language_modules(fn, tl) -> tuple:
    langs = _langs_of.get(fn)
    if langs is None:
        langs = _langs_of[fn] = tuple(v for v in fn.__globals__.values()
                                      if inspect.ismodule(v) and v in (tl, tl.core))
    return langs


def install() -> bool:
    """Install the wrappers (module docstring); True when they are active after the call."""
    if _INSTALLED["on"]:
        return True
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    patch_lang = getattr(interpreter, "_patch_lang", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if patch_lang is None or executor is None or "__call__" not in vars(executor):
        return False
    if list(inspect.signature(patch_lang).parameters) != ["fn"]:
        return False
    grid_call = executor.__call__

    def launch(self, *args, **kwargs):
        _launches.append(set())
        _pending[0] = True
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            _pending[0] = False
            _launches.pop()

    def patch(fn):
        langs = _language_modules(fn, tl)
        if _pending[0]:  # the launch's own patch: restored when the launch ends
            _pending[0] = False
            scope = _INSTALLED["patch_lang"](fn)
            _launches[-1].update(id(m) for m in langs)
            return scope
        if _launches and langs and all(id(m) in _launches[-1] for m in langs):
            return _EmptyScope()
        scope = _INSTALLED["patch_lang"](fn)
        if _launches:
            _launches[-1].update(id(m) for m in langs)
        return scope

    interpreter._patch_lang = patch
    executor.__call__ = launch
    _INSTALLED.update(on=True, patch_lang=patch_lang, grid_call=grid_call)
    return True


def uninstall() -> None:
    """Put Triton's own ``_patch_lang`` and ``GridExecutor.__call__`` back (tests compare both)."""
    if not _INSTALLED["on"]:
        return
    from triton.runtime import interpreter

    interpreter._patch_lang = _INSTALLED["patch_lang"]
    interpreter.GridExecutor.__call__ = _INSTALLED["grid_call"]
    _INSTALLED.update(on=False, patch_lang=None, grid_call=None)


def installed() -> bool:
    return _INSTALLED["on"]
