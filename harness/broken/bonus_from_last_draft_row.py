"""BUGS.md class 4: when every draft is accepted, the bonus token is sampled from the last DRAFT
position's target row ``b_k`` instead of ``b_{k+1}``. Expected catcher: ``conditional_law`` (the
``tau == g`` cells)."""

from harness.implementations.torch_eager import TorchEagerKernel


class BonusFromLastDraftRow(TorchEagerKernel):
    name = "broken.bonus_from_last_draft_row"

    def bonus_row(self, pb):
        return pb.target[pb.rows, (pb.lengths - 1).clamp(min=0)]


kernel = BonusFromLastDraftRow()
