"""BUGS.md class 18 (contract drift): ``output_token_ids`` padded with 0 instead of -1, so padding
looks like emitted token 0. Expected catcher: ``structural``."""

from harness.implementations.torch_eager import TorchEagerKernel


class PaddingZero(TorchEagerKernel):
    name = "broken.padding_zero"

    def assemble(self, pb, tau, final):
        out, num_emitted = super().assemble(pb, tau, final)
        return out.clamp(min=0), num_emitted


kernel = PaddingZero()
