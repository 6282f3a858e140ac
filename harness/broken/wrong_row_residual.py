"""BUGS.md class 2 (flashinfer#425): a stale row offset makes the token residual read the NEXT
position's target row, ``(b_{tau+2} - q_{tau+1})_+``. Invisible when every position has the same rows
(vLLM's own tests); the conditional law with rows that differ per position shows it.
Expected catcher: ``conditional_law``."""

from harness.implementations.torch_eager import TorchEagerKernel


class WrongRowResidual(TorchEagerKernel):
    name = "broken.wrong_row_residual"

    def token_residual(self, pb, tau):
        if pb.k_max == 0:
            return pb.target[:, 0]
        at = tau.clamp(max=pb.k_max - 1)
        return (pb.target[pb.rows, at + 1] - pb.draft[pb.rows, at]).clamp(min=0.0)


kernel = WrongRowResidual()
