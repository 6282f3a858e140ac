"""Fixtures of the kernel tests."""

from __future__ import annotations

import pytest

from kernels import tuning


@pytest.fixture
def tuning_env(monkeypatch):
    """``tuning_env(NAME, value)`` sets a ``SPECFUZZ_*`` tuning variable and re-reads the knobs (they
    are read once per process, so a bare ``setenv`` after the first launch changes nothing); the
    knobs are re-read from the restored environment afterwards."""

    def set_knob(name: str, value: str) -> None:
        monkeypatch.setenv(name, value)
        tuning.refresh()

    yield set_knob
    monkeypatch.undo()
    tuning.refresh()


@pytest.fixture
def kernel_launches(monkeypatch):
    """The names of the kernels launched while the test runs, in order, whichever way the driver
    launches them (``FastLaunch.launch``, or a launcher from ``FastLaunch.bind``)."""
    from kernels.chunking import release_workspaces
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
