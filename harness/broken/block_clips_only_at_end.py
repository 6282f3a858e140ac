"""BUGS.md class 6 / SPEC.md section 2 trap: the cumulative ratio is clipped once, ``min(1, prod r)``,
instead of at every step. The first-token law cannot see it; the conditional and joint laws can.
Expected catchers: ``conditional_law``, ``marginal_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class BlockClipsOnlyAtEnd(TorchEagerKernel):
    name = "broken.block_clips_only_at_end"

    def block_ratios(self, pb):
        b_x, q_x = pb.at_draft(pb.target), pb.at_draft(pb.draft)
        ratio = torch.where(pb.draft_valid, b_x / q_x.clamp(min=1e-300), 1.0)
        p = torch.ones(pb.num_reqs, pb.k_max + 1, dtype=torch.float64)
        p[:, 1:] = torch.cumprod(ratio, dim=1).clamp(max=1.0)
        return torch.where(torch.cat([torch.ones_like(pb.draft_valid[:, :1]), pb.draft_valid], 1), p, 0.0)


kernel = BlockClipsOnlyAtEnd()
