"""specfuzz's production Triton kernels for speculative-decoding verification.

Public entry points (docs/interfaces.md section 4): :func:`rejection_sample` and :func:`random_draws`;
:func:`capture_verify` replays a fixed batch layout from a CUDA graph. Each thread keeps its last
workspace per device and stream for reuse (a few MB at most, bounded by ``max_chunk_bytes``);
:func:`release_workspaces` frees them. A request may carry at most ``MAX_DRAFT_TOKENS`` (127) drafts; longer
ones raise ``ValueError`` before any verification launch.
Importing this package selects the Triton CPU interpreter when no GPU is present.
"""

from kernels import _device  # noqa: F401  (must run before triton is imported)
from kernels.chunking import release_workspaces
from kernels.randomness import random_draws
from kernels.driver import rejection_sample
from kernels.graph import CapturedVerify, capture_verify
from kernels.validation import MAX_DRAFT_TOKENS

__all__ = ["rejection_sample", "random_draws", "capture_verify", "CapturedVerify", "release_workspaces",
           "MAX_DRAFT_TOKENS"]

if not _device.INTERPRETING:
    from kernels import function_hashes

    function_hashes.settle()  # the same Triton function hashes in every process (issue 49)
