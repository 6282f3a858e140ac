"""kernels/interpreter_patching.py: the same outputs as Triton's own interpreter, with far fewer
re-patches of ``triton.language`` (CPU only: compiled Triton never patches)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
import torch

import kernels
from kernels import interpreter_patching
from kernels._device import INTERPRETING
from tests.kernels._batches import make_batch

pytestmark = [pytest.mark.interpreter,
              pytest.mark.skipif(not INTERPRETING, reason="only the CPU interpreter patches the language")]


def _run(batch, method):
    ids, num, _ = kernels.rejection_sample(*batch.args(), method=method)
    return ids.clone(), num.clone()


def _without_it(call):
    """``call()`` under Triton's own patching, then the wrappers back."""
    interpreter_patching.uninstall()
    try:
        return call()
    finally:
        interpreter_patching.install()


def _counted_patches(monkeypatch) -> list:
    """Calls that reach Triton's own ``_patch_lang`` (a full patch), counted."""
    from triton.runtime import interpreter

    calls = []
    original = interpreter_patching._INSTALLED["patch_lang"] or interpreter._patch_lang

    def counting(fn):
        calls.append(fn.__name__)
        return original(fn)

    if interpreter_patching.installed():
        monkeypatch.setitem(interpreter_patching._INSTALLED, "patch_lang", counting)
    else:
        monkeypatch.setattr(interpreter, "_patch_lang", counting)
    return calls


@pytest.mark.parametrize("method, family", [("token", "normal"), ("block", "masked"), ("token", "ties")])
def test_outputs_are_bit_identical_without_it(method, family):
    seed = 20261206
    print(f"seed {seed}")
    batch = make_batch(seed, num_reqs=3, max_k=3, vocab=40, family=family)
    assert interpreter_patching.installed(), "kernels._device installs it under the interpreter"
    fast = _run(batch, method)
    slow = _without_it(lambda: _run(batch, method))
    assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])


def test_helpers_inside_a_launch_do_not_repatch(monkeypatch):
    """With it, a few full patches per launch; without it, one per helper call as well (hundreds)."""
    batch = make_batch(3, num_reqs=2, max_k=2, vocab=16)
    with_it = _counted_patches(monkeypatch)
    _run(batch, "token")
    monkeypatch.undo()
    interpreter_patching.uninstall()
    try:
        without = _counted_patches(monkeypatch)
        _run(batch, "token")
    finally:
        monkeypatch.undo()
        interpreter_patching.install()
    assert any(name.endswith("_kernel") for name in with_it)  # each launch still patches
    assert len(without) > 10 * len(with_it), (len(without), with_it)


# Modules that name the language differently: a kernel through ``tl``, its helper through both
# ``tl`` and ``core``, and a kernel that binds only ``core`` (as Triton's own standard library does).
# A helper naming a module its launch did not patch must still be patched; nothing may leak into a
# later launch.
_MODULES = {
    "sf_patch_helper": """
        import triton
        import triton.language as tl
        from triton.language import core

        @triton.jit
        def double_sum(x):
            return tl.sum(core.where(x > 1e9, x, x * 2), axis=0)
        """,
    "sf_patch_kernel": """
        import triton
        import triton.language as tl
        from sf_patch_helper import double_sum

        @triton.jit
        def via_tl(x_ptr, out_ptr):
            offs = tl.arange(0, 8)
            tl.store(out_ptr, double_sum(tl.load(x_ptr + offs)))
        """,
    "sf_patch_core_kernel": """
        import triton
        from triton.language import core as tl

        @triton.jit
        def via_core(x_ptr, out_ptr):
            offs = tl.arange(0, 8)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
        """,
}


@pytest.fixture
def mixed_modules(tmp_path, monkeypatch):
    for name, source in _MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield {name: importlib.import_module(name) for name in _MODULES}
    for name in _MODULES:
        sys.modules.pop(name, None)


def test_kernels_that_name_the_language_differently_run_as_without_it(mixed_modules):
    x = torch.arange(8, dtype=torch.float32)
    batch = make_batch(11, num_reqs=2, max_k=2, vocab=16)

    def sequence():
        out = []
        for _ in range(2):  # a second launch must not see anything left by the first
            total = torch.zeros(1)
            mixed_modules["sf_patch_kernel"].via_tl[(1,)](x, total)
            plus = torch.zeros(8)
            mixed_modules["sf_patch_core_kernel"].via_core[(1,)](x, plus)
            out += [total.clone(), plus.clone(), *_run(batch, "token")]
        return out

    fast = sequence()
    slow = _without_it(sequence)
    assert fast[0].item() == 2 * x.sum().item() and torch.equal(fast[1], x + 1)
    assert all(torch.equal(a, b) for a, b in zip(fast, slow, strict=True))


def test_a_different_interpreter_is_left_alone(monkeypatch):
    """Internals it does not recognise: nothing installed (interpretation at Triton's own speed)."""
    from triton.runtime import interpreter

    interpreter_patching.uninstall()
    try:
        monkeypatch.setattr(interpreter, "_patch_lang", lambda fn, extra: None)
        assert interpreter_patching.install() is False and not interpreter_patching.installed()
    finally:
        monkeypatch.undo()
        interpreter_patching.install()
    assert interpreter_patching.installed()
