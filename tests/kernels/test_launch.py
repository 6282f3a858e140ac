"""kernels.launch.FastLaunch: the compiled kernel is reused only for the same specialisation key, and
its launcher gets exactly Triton's argument list (runtime arguments, then constexprs in order)."""

from __future__ import annotations

import pytest
import torch

import kernels._device
from kernels import launch


class FakeCompiled:
    function, packed_metadata = "fn", "meta"

    def __init__(self):
        self.launches = []

    def run(self, *args):
        self.launches.append(args)


class FakeJit:
    arg_names = ["x_ptr", "n", "BLOCK", "FLAG"]

    def __init__(self):
        self.slow_calls = []

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.slow_calls.append((grid, args, kwargs))
            return FakeCompiled()
        return call


def test_reuses_the_compiled_kernel_per_specialisation(monkeypatch):
    monkeypatch.setattr(launch, "ENABLED", True)
    monkeypatch.setattr(kernels._device, "INTERPRETING", False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "current_raw_stream", lambda device: 1234)
    monkeypatch.setattr(launch, "_hooks_set", lambda: False)
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    x = torch.zeros(8)
    first = fast[(3,)](x, 32, BLOCK=16, FLAG=True, num_warps=4)
    assert len(jit.slow_calls) == 1 and not first.launches
    again = fast[(5, 2)](x, 48, BLOCK=16, FLAG=True, num_warps=4)  # same classes: 48 % 16 == 0, != 1
    assert again is first and len(jit.slow_calls) == 1
    assert first.launches == [(5, 2, 1, 1234, "fn", "meta", None, None, None, x, 48, 16, True)]
    for args, kwargs in (((x, 1), dict(BLOCK=16, FLAG=True, num_warps=4)),  # n == 1 is specialised
                         ((x, 33), dict(BLOCK=16, FLAG=True, num_warps=4)),  # 33 % 16 != 0
                         ((x.double(), 32), dict(BLOCK=16, FLAG=True, num_warps=4)),  # dtype
                         ((x, 32), dict(BLOCK=32, FLAG=True, num_warps=4)),  # constexpr
                         ((x, 32), dict(BLOCK=16, FLAG=True, num_warps=8))):  # options
        fast[(1,)](*args, **kwargs)
    assert len(jit.slow_calls) == 6


def test_interpreter_default_and_hooks_take_tritons_path(monkeypatch):
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    monkeypatch.setattr(launch, "ENABLED", True)
    monkeypatch.setattr(kernels._device, "INTERPRETING", True)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    monkeypatch.setattr(kernels._device, "INTERPRETING", False)
    monkeypatch.setattr(launch, "_hooks_set", lambda: True)  # a profiler's hook: Triton's path
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    monkeypatch.setattr(launch, "_hooks_set", lambda: False)
    monkeypatch.setattr(launch, "ENABLED", False)  # Triton's own launch path
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    assert len(jit.slow_calls) == 4 and fast.arg_names == FakeJit.arg_names


def test_empty_hook_chains_do_not_count_as_hooks():
    class Chain:
        def __init__(self, calls):
            self.calls = calls

    assert not launch._hook_active(None) and not launch._hook_active(Chain([]))
    assert launch._hook_active(Chain([print])) and launch._hook_active(print)


def _fast_path(monkeypatch, check: bool):
    monkeypatch.setattr(launch, "ENABLED", True)
    monkeypatch.setattr(launch, "CHECK_VARIANTS", check)
    monkeypatch.setattr(kernels._device, "INTERPRETING", False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "current_raw_stream", lambda device: 1234)
    monkeypatch.setattr(launch, "_hooks_set", lambda: False)


def test_loose_arguments_share_a_specialisation(monkeypatch):
    """Counts (``do_not_specialize``) differ only by integer type; metadata pointers only by dtype."""
    _fast_path(monkeypatch, check=False)
    jit = FakeJit()
    fast = launch.FastLaunch(jit, loose_names=("x_ptr", "n"))
    x = torch.zeros(8)
    first = fast[(1,)](x, 1, BLOCK=16, FLAG=True)
    fast[(1,)](x[1:], 33, BLOCK=16, FLAG=True)  # misaligned pointer, n % 16 != 0, n != 1: same kernel
    assert len(jit.slow_calls) == 1 and len(first.launches) == 1
    fast[(1,)](x, 2**40, BLOCK=16, FLAG=True)  # int64: another kernel
    fast[(1,)](x.double(), 1, BLOCK=16, FLAG=True)  # dtype: another kernel
    assert len(jit.slow_calls) == 3


def test_variant_skips_the_argument_key_and_the_check_catches_a_wrong_variant(monkeypatch):
    _fast_path(monkeypatch, check=False)
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    x = torch.zeros(8)
    first = fast[(1,)](x, 32, BLOCK=16, FLAG=True, variant=("v",))
    fast[(1,)](x, 1, BLOCK=16, FLAG=True, variant=("v",))  # trusted: no key computed, same kernel
    assert len(jit.slow_calls) == 1 and len(first.launches) == 1
    assert "variant" not in jit.slow_calls[0][2]  # never passed to Triton
    monkeypatch.setattr(launch, "CHECK_VARIANTS", True)
    checked = launch.FastLaunch(jit)
    checked[(1,)](x, 32, BLOCK=16, FLAG=True, variant=("v",))
    checked[(1,)](x, 48, BLOCK=16, FLAG=True, variant=("v",))  # same specialisation: fine
    with pytest.raises(AssertionError, match="covers two specialisations"):
        checked[(1,)](x, 1, BLOCK=16, FLAG=True, variant=("v",))  # n == 1 is specialised


def test_bind_launches_directly_once_compiled(monkeypatch):
    """``bind`` falls back to ``launch`` until the variant is compiled; afterwards the bound launcher
    calls the compiled kernel with Triton's argument list and never goes through Triton's path."""
    _fast_path(monkeypatch, check=False)
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    x = torch.zeros(8)
    kwargs = dict(BLOCK=16, FLAG=True, num_warps=4)
    cold = fast.bind((3,), kwargs, variant=("v",))
    assert not getattr(cold, "direct", False)
    compiled = cold(x, 32)
    assert len(jit.slow_calls) == 1 and not compiled.launches
    warm = fast.bind((3, 2), kwargs, variant=("v",))
    assert warm.direct and warm(x, 48) is compiled and len(jit.slow_calls) == 1
    assert compiled.launches == [(3, 2, 1, 1234, "fn", "meta", None, None, None, x, 48, 16, True)]
    assert not getattr(fast.bind((3,), kwargs, variant=None), "direct", False)  # no variant: no trust


def test_bound_launcher_checks_its_variant(monkeypatch):
    """With ``CHECK_VARIANTS`` (every pytest run) the direct launcher still compares the variant with
    the per-argument key, so tests on a GPU exercise the direct path and still catch a wrong variant."""
    _fast_path(monkeypatch, check=True)
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    x = torch.zeros(8)
    kwargs = dict(BLOCK=16, FLAG=True)
    fast.bind((1,), kwargs, variant=("v",))(x, 32)
    bound = fast.bind((1,), kwargs, variant=("v",))
    assert bound.direct
    bound(x, 48)  # same specialisation: fine
    with pytest.raises(AssertionError, match="covers two specialisations"):
        bound(x, 1)  # n == 1 is specialised
    assert len(jit.slow_calls) == 1
