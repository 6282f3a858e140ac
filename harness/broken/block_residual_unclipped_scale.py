"""BUGS.md class 6 / SPEC.md section 2 trap (relation: a block correction lies in ``(p_tau b - q)_+``,
issue 33): the stop probabilities use the per-step clipped ``p_i``, but the residual after a stop is
scaled by the UNCLIPPED running product ``prod r`` (a kernel that clips its running log-ratio only
where it forms ``h``). After a ratio above 1 the scale exceeds ``p_tau``, and the correction can be a
token where ``p_tau b <= q``. Expected catchers: ``law_consequences``, ``conditional_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class BlockResidualUnclippedScale(TorchEagerKernel):
    name = "broken.block_residual_unclipped_scale"

    def block_residual(self, pb, p, tau):
        if pb.k_max == 0:
            return pb.target[:, 0]
        b_x, q_x = pb.at_draft(pb.target), pb.at_draft(pb.draft)
        ratio = torch.where(pb.draft_valid, b_x / q_x.clamp(min=1e-300), 1.0)
        scale = torch.cat([torch.ones(pb.num_reqs, 1, dtype=ratio.dtype), torch.cumprod(ratio, dim=1)], 1)
        at = tau.clamp(max=pb.k_max - 1)
        w = scale[pb.rows, tau, None] * pb.target[pb.rows, at] - pb.draft[pb.rows, at]
        return w.clamp(min=0.0)


kernel = BlockResidualUnclippedScale()
