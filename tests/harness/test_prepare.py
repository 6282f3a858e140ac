"""The optional ``prepare()`` of a kernel under test (harness/contract.py ``KernelUnderTest``): a kernel
that cannot run here (a broken install) stops ``check`` and ``replay`` with the reason and exit 2,
before any property runs, instead of failing every case with the same error (vLLM 0.34 on an H100,
2026-12-07: 12 failed and 5 errored properties, each "verify raised ImportError ...")."""

from __future__ import annotations

import pytest

from harness import cli
from harness.adapters.reference_kernel import ReferenceKernel
from harness.contract import KernelNotReady, prepare_kernel

CALLS: list[str] = []


class NotInstalled(ReferenceKernel):
    name = "not-installed"

    def prepare(self):
        raise ImportError("huggingface-hub>=1.5.0,<2.0 is required, but found huggingface-hub==2.4.0")

    def verify(self, batch):
        CALLS.append("verify")
        return super().verify(batch)


kernel = NotInstalled()
ready = ReferenceKernel()


def test_prepare_kernel_names_the_kernel_and_the_cause():
    with pytest.raises(KernelNotReady, match="not-installed.*ImportError.*huggingface-hub"):
        prepare_kernel(kernel)
    prepare_kernel(ready)  # no prepare: nothing to do
    prepare_kernel(object())


def test_check_and_replay_stop_before_any_property(capsys):
    CALLS.clear()
    spec = f"{__name__}:kernel"
    assert cli.main(["check", "--kernel", spec, "--profile", "ci", "--device", "cpu", "--seed", "1",
                     "--only", "structural", "--in-process"]) == 2
    assert "cannot run here" in capsys.readouterr().err
    assert cli.main(["replay", "--kernel", spec, "--device", "cpu"]) == 2
    assert "cannot run here" in capsys.readouterr().out
    assert CALLS == []


def test_vllm_import_errors_become_unavailable(monkeypatch):
    vllm = pytest.importorskip("harness.adapters.vllm")

    def broken(found, newer):
        raise ImportError("huggingface-hub>=1.5.0,<2.0 is required")

    monkeypatch.setattr(vllm, "installed_version", lambda: "0.34.0")
    monkeypatch.setattr(vllm, "_import_vllm_modules", broken)
    vllm._import_vllm.cache_clear()
    try:
        with pytest.raises(KernelNotReady, match="cannot be imported here.*huggingface-hub"):
            prepare_kernel(vllm.VllmMRV2())
    finally:
        vllm._import_vllm.cache_clear()
