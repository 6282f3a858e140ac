"""Fixtures of the kernel tests."""

from __future__ import annotations

import pytest

from kernels import tuning
from kernels.chunking import release_workspaces


@pytest.fixture
def kernel_setting(monkeypatch):
    """``kernel_setting(module, NAME, value)`` sets a module constant of ``kernels/`` (a
    ``kernels.tuning`` value, ``call_plan.ENABLED``, ...) for the test, and drops what was derived
    from the old value (cached geometries, kept workspaces and call plans) when it is set and when
    the test ends."""

    def forget() -> None:
        tuning.geometry.cache_clear()
        release_workspaces()

    def set_constant(module, name: str, value) -> None:
        assert hasattr(module, name), (module, name)
        monkeypatch.setattr(module, name, value)
        forget()

    yield set_constant
    monkeypatch.undo()
    forget()


@pytest.fixture
def kernel_launches(monkeypatch):
    """The names of the kernels launched while the test runs, in order, whichever way the driver
    launches them (``FastLaunch.launch``, or a launcher from ``FastLaunch.bind``)."""
    from kernels.launch import FastLaunch

    names: list[str] = []
    real_launch, real_bind = FastLaunch.launch, FastLaunch.bind

    def name_of(fast) -> str:
        return getattr(fast.fn, "__name__", None) or fast.fn.fn.__name__

    def launch(self, grid, args, kwargs, variant=None):
        names.append(name_of(self))
        return real_launch(self, grid, args, kwargs, variant)

    def bind(self, grid, kwargs, variant=None):
        bound = real_bind(self, grid, kwargs, variant)

        def recorded(*args):
            # a launcher that falls back to ``launch`` is recorded there
            if getattr(bound, "direct", False):
                names.append(name_of(self))
            return bound(*args)
        return recorded

    monkeypatch.setattr(FastLaunch, "launch", launch)
    monkeypatch.setattr(FastLaunch, "bind", bind)
    release_workspaces()  # call plans keep launchers bound earlier, unrecorded: start without any
    yield names
    release_workspaces()
