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
