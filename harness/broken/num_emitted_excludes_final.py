"""BUGS.md class 18 (TensorRT-LLM#17437, contract drift in counters): ``num_emitted`` counts only the
accepted drafts, not the correction/bonus token (``tau`` instead of ``tau + 1``). Expected catchers:
``structural`` (range and padding), ``conditional_law`` (shifted law)."""

from harness.implementations.torch_eager import TorchEagerKernel


class NumEmittedExcludesFinal(TorchEagerKernel):
    name = "broken.num_emitted_excludes_final"

    def assemble(self, pb, tau, final):
        out, num_emitted = super().assemble(pb, tau, final)
        return out, num_emitted - 1


kernel = NumEmittedExcludesFinal()
