"""Invented (BUGS.md-style out-of-range write, on the GPU: a Triton store through an index that
overflowed): ``verify`` launches a Triton kernel that stores one float 2^40 elements past its output
when ``V > 40`` and there are at least 2 requests. On a CUDA device that is an illegal address: the
launch fails and the process's CUDA context is unusable from then on. Correct otherwise.

CUDA only: ``capabilities.devices`` is ``{"cuda"}``, so ``check`` refuses it on the CPU (exit 2) and
``bench/teeth.py`` skips it there. (Under Triton's CPU interpreter the same store would write to a
wild host address: a segfault at best, silent corruption at worst, which is not what this entry
demonstrates.) Expected catcher: ``structural`` (a ``crash`` finding naming the CUDA error)."""

import dataclasses

import torch
import triton
import triton.language as tl

import kernels._device  # noqa: F401  (before triton: compiled on a GPU, interpreted elsewhere)
from harness.broken.faulting import FaultsOnLargeBatches

FAR = 1 << 40  # elements past the output: far outside any allocation


@triton.jit
def _store_far_away(out_ptr, offset):
    tl.store(out_ptr + offset, 1.0)


class CudaOobStore(FaultsOnLargeBatches):
    name = "broken.cuda_oob_store"
    capabilities = dataclasses.replace(FaultsOnLargeBatches.capabilities, devices=frozenset({"cuda"}))

    def fault(self, batch):
        if batch.device.type != "cuda":
            raise RuntimeError("cuda_oob_store faults only on a CUDA device")
        out = torch.zeros(1, dtype=torch.float32, device=batch.device)
        _store_far_away[(1,)](out, FAR)
        torch.cuda.synchronize(batch.device)


kernel = CudaOobStore()
