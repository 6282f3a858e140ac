"""BUGS.md class 3: after a rejection the correction is resampled from the target row ``b`` instead
of the residual ``(b - q)_+`` (token) or ``(p b - q)_+`` (block). The output is then biased towards
the draft's tokens. Expected catchers:
``law_consequences``, ``conditional_law``, ``marginal_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class ResidualFromTarget(TorchEagerKernel):
    name = "broken.residual_from_target"

    def token_residual(self, pb, tau):
        return pb.target[pb.rows, tau.clamp(max=max(pb.k_max - 1, 0))]

    def block_residual(self, pb, p, tau):
        return self.token_residual(pb, tau)


kernel = ResidualFromTarget()
