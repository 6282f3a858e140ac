"""kernels.launch.FastLaunch: the compiled kernel is reused only for the same specialisation key, and
its launcher gets exactly Triton's argument list (runtime arguments, then constexprs in order)."""

from __future__ import annotations

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
    monkeypatch.setenv("SPECFUZZ_FAST_LAUNCH", "1")
    monkeypatch.setattr(kernels._device, "INTERPRETING", False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch, "_current_raw_stream", lambda device: 1234)
    monkeypatch.setattr(launch, "_hooks_set", lambda: False)
    jit = FakeJit()
    fast = launch.FastLaunch(jit)
    x = torch.zeros(8)
    first = fast[(3,)](x, 32, BLOCK=16, FLAG=True, num_warps=4)
    assert len(jit.slow_calls) == 1 and not first.launches
    again = fast[(5, 2)](x, 48, FLAG=True, BLOCK=16, num_warps=4)  # same classes: 48 % 16 == 0, != 1
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
    monkeypatch.setenv("SPECFUZZ_FAST_LAUNCH", "1")
    monkeypatch.setattr(kernels._device, "INTERPRETING", True)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    monkeypatch.setattr(kernels._device, "INTERPRETING", False)
    monkeypatch.setattr(launch, "_hooks_set", lambda: True)  # a profiler's hook: Triton's path
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    monkeypatch.delenv("SPECFUZZ_FAST_LAUNCH")  # the default is off
    fast[(1,)](torch.zeros(2), 32, BLOCK=16, FLAG=True)
    assert len(jit.slow_calls) == 4 and fast.arg_names == FakeJit.arg_names


def test_empty_hook_chains_do_not_count_as_hooks():
    class Chain:
        def __init__(self, calls):
            self.calls = calls

    assert not launch._hook_active(None) and not launch._hook_active(Chain([]))
    assert launch._hook_active(Chain([print])) and launch._hook_active(print)
