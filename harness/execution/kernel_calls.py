"""Calling a kernel under test without letting its faults take the harness down.

Every property calls the kernel through ``call_verify`` / ``call_random_draws`` / ``call_verify_into``.
An exception raised by the kernel becomes ``KernelRaised`` (the case fails with the error text and the
run goes on). On CUDA, after any exception the device is probed; if the probe fails too, the CUDA
context is corrupted (an illegal address poisons every later launch in the process) and
``DeviceFault`` is raised instead: the runner then continues the remaining properties in a fresh
subprocess (harness/runner.py).

``KernelFault`` is what a supervised call (harness/execution/supervisor.py) raises when the worker process
running the kernel died (a signal, a hard exit), left its CUDA device unusable, or outlived its time
limit. It is deliberately not a ``KernelRaised``: properties that judge the kernel's exceptions (bad
input must raise ``ValueError``) never see it, and it travels up to ``CaseProperty.check_guarded``
(a ``crash`` or ``hang`` finding on the case) or to the runner (the same, on a whole property).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

import torch

from harness.contract import VerifyBatch, VerifyOutput


class KernelRaised(Exception):
    """The kernel under test raised; ``error`` is the original exception."""

    def __init__(self, what: str, error: BaseException):
        self.what = what
        self.error = error
        local = traceback.format_exception(type(error), error, error.__traceback__)[-6:]
        self.trace = getattr(error, "remote_traceback", None) or "".join(local)  # remote: from a worker
        super().__init__(f"{what} raised {type(error).__name__}: {error}")


class DeviceFault(KernelRaised):
    """The kernel raised and the device no longer works in this process."""


class KernelFault(Exception):
    """A supervised kernel call ended its worker: ``kind`` is ``crash`` or ``hang``, ``what`` the call
    (``verify``, ...), ``evidence`` the exit status or signal, the time limit and the worker's stderr
    tail; ``batch`` the call's ``VerifyBatch`` (a whole-property finding takes its case from it)."""

    def __init__(self, kind: str, what: str, message: str, evidence: dict, batch: object = None):
        self.kind, self.what, self.evidence, self.batch = kind, what, evidence, batch
        super().__init__(message)


class WorkerError(RuntimeError):
    """The supervised worker could not start or load the kernel: a setup problem, never a finding."""


def device_healthy(device: torch.device) -> bool:
    """True unless ``device`` is a CUDA device on which a trivial launch now fails."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
        probe = torch.arange(4, device=device, dtype=torch.float32) + 1
        return float(probe.sum().item()) == 10.0
    except Exception:  # noqa: BLE001 -- any failure here means the context is gone
        return False


# Tests replace this to simulate a corrupted context on CPU.
HEALTH_CHECK: Callable[[torch.device], bool] = device_healthy


def _guarded(what: str, device: torch.device, fn: Callable, *args):
    try:
        result = fn(*args)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # surface asynchronous launch errors here, not later
        return result
    except (KernelFault, WorkerError):
        raise
    except Exception as exc:  # noqa: BLE001 -- a kernel may raise anything
        if not HEALTH_CHECK(device):
            raise DeviceFault(what, exc) from exc
        raise KernelRaised(what, exc) from exc


def call_verify(kernel: object, batch: VerifyBatch) -> VerifyOutput:
    out = _guarded("verify", batch.device, kernel.verify, batch)
    if not HEALTH_CHECK(batch.device):
        raise DeviceFault("verify", RuntimeError("device unusable after the call"))
    return out


def call_random_draws(kernel: object, batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
    return _guarded("random_draws", batch.device, kernel.random_draws, batch)


def call_verify_into(kernel: object, batch: VerifyBatch, out: VerifyOutput) -> None:
    _guarded("verify_into", batch.device, kernel.verify_into, batch, out)
