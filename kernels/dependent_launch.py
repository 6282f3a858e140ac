"""Programmatic dependent launch (PDL, sm_90+): the next kernel of a chunk starts while this one ends.

Without it, each kernel of a chunk's sequence (row table, pass 1, decide, pass 2, decide, race)
starts only after the previous one has finished and its launch has been processed: one launch
latency and one tail wave per boundary. With ``launch_pdl`` the CUDA driver may start a kernel's
programs once every program of the kernel before it has executed ``griddepcontrol.launch_dependents``
(``let_next_start``, the first thing each of our kernels does), so they occupy what the last wave of
the previous kernel leaves free. Each program then loads what depends only on the call's inputs
(logit blocks, draft ids, ``cu``, seeds, the accept uniforms) and waits in
``wait_for_previous`` (``griddepcontrol.wait``: every earlier kernel of the stream has completed
and its writes are visible) before it reads anything a kernel of the chunk wrote, or writes anything.

Rules that keep this exact:

- the first kernel of a chunk (the row table, or pass 1 after the value summary wrote the table) is
  a plain launch, so it waits for whatever ran before it in the stream: the previous chunk or call
  reuses the same workspace;
- every program of a dependent kernel runs ``wait_for_previous`` before it exits, so the kernel's
  completion implies its predecessor's, and the guarantee chains along the sequence;
- nothing is stored before the wait.

Only compiled kernels on devices of compute capability 9.0 or more use it (``enabled``); the
interpreter and older GPUs compile the plain sequence.
"""

from __future__ import annotations

import triton
import triton.language as tl

import kernels._device
from kernels._device import COMPILED

# Test-only: nanoseconds the row table spins before it writes, with dependent launches on
# (``hold``; tests/kernels/test_gpu.py sets it). 0 on every real call.
TEST_TABLE_DELAY_NS = 0


@triton.jit
def let_next_start(PDL: tl.constexpr):
    """Allow the next kernel in the stream (when launched with ``launch_pdl``) to start its programs."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def wait_for_previous(PDL: tl.constexpr):
    """Block until every earlier kernel of the stream has completed and its writes are visible."""
    if PDL:
        tl.extra.cuda.gdc_wait()


_ENABLED_BY_DEVICE: dict = {}  # (device type, index) -> bool


def enabled(device) -> bool:
    """Whether a chunk's kernels on ``device`` run as programmatic dependent launches: compiled CUDA
    kernels on compute capability >= 9.0. Cached per device: the driver asks once per chunk."""
    key = (device.type, device.index)
    cached = _ENABLED_BY_DEVICE.get(key)
    if cached is not None:
        return cached
    on = not kernels._device.INTERPRETING and device.type == "cuda"
    if on:
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        on = torch.cuda.get_device_capability(index)[0] >= 9
    if device.index is not None:  # an index-less device means the current one, which can change
        _ENABLED_BY_DEVICE[key] = on
    return on


def options(pdl: bool, *, first: bool = False) -> dict:
    """Launch keywords of a kernel of the chunk's sequence: the ``PDL`` constexpr, and the launch
    attribute unless the kernel is the chunk's first (``first``: a plain launch)."""
    if not pdl:
        return {"PDL": False}
    return {"PDL": True} if first else {"PDL": True, "launch_pdl": True}


@triton.jit
def _global_ns():
    """The GPU's nanosecond clock (``%globaltimer``), as a one-element block."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [tl.zeros((1,), tl.int32)],
                                     dtype=tl.uint64, is_pure=False, pack=1)


@triton.jit
def hold(NS: tl.constexpr):
    """Test-only: spin for ``NS`` nanoseconds (compiled kernels; nothing when ``NS`` is 0 or under the
    interpreter). The row table calls it after ``let_next_start`` with ``TEST_TABLE_DELAY_NS``, which
    widens the window in which a pass 1 that skipped its wait would read the previous call's table
    (tests/kernels/test_gpu.py; without it the table is done before pass 1 loads)."""
    if COMPILED:
        if NS > 0:
            start = tl.max(_global_ns(), axis=0)
            now = start
            while now - start < NS:
                now = tl.max(_global_ns(), axis=0)
