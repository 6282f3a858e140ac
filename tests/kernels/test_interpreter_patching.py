"""kernels/interpreter_patching.py: the same outputs as Triton's own interpreter, with far fewer
re-patches of ``triton.language`` (CPU only: compiled Triton never patches)."""

from __future__ import annotations

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


def _counted_patches(monkeypatch) -> list:
    """Calls that reach Triton's own ``_patch_lang`` (a full re-patch), counted."""
    from triton.runtime import interpreter

    calls = []
    original = interpreter_patching._INSTALLED["original"] or interpreter._patch_lang

    def counting(fn):
        calls.append(fn.__name__)
        return original(fn)

    if interpreter_patching.installed():
        monkeypatch.setitem(interpreter_patching._INSTALLED, "original", counting)
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
    interpreter_patching.uninstall()
    try:
        slow = _run(batch, method)
    finally:
        interpreter_patching.install()
    assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])


def test_helpers_inside_a_launch_do_not_repatch(monkeypatch):
    """With it, about one full patch per launch; without it, one per helper call as well (hundreds)."""
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
    assert any(name.endswith("_kernel") for name in with_it)  # each launch still patches once
    assert len(without) > 10 * len(with_it), (len(without), with_it)


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
