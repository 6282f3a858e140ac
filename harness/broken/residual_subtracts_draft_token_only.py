"""BUGS.md class 3 (xllm#2175): the residual subtracts only the draft token's own probability,
``b - q(x) e_x``, instead of the whole draft row ``(b - q)_+``. Identical for point-mass drafts, wrong
with draft logits. Expected catcher: ``conditional_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class ResidualSubtractsDraftTokenOnly(TorchEagerKernel):
    name = "broken.residual_subtracts_draft_token_only"

    def token_residual(self, pb, tau):
        if pb.k_max == 0:
            return pb.target[:, 0]
        at = tau.clamp(max=pb.k_max - 1)
        w = pb.target[pb.rows, at].clone()
        x = pb.draft_ids[pb.rows, at]
        w[pb.rows, x] = (w[pb.rows, x] - pb.draft[pb.rows, at, x]).clamp(min=0.0)
        return w


kernel = ResidualSubtractsDraftTokenOnly()
