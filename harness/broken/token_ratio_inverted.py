"""Invented, BUGS.md class 19 in spirit (relation: token verification never rejects a draft with
``b(x) > q(x)``, issue 33): with draft logits the acceptance test has target and draft swapped,
``u * b(x) < q(x)``; the point-mass path (``u < b(x)``) is right. Equal models still accept
everything (ratio 1), so ``equal_models_accept_all`` is blind to it. Expected catchers:
``law_consequences``, ``conditional_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class TokenRatioInverted(TorchEagerKernel):
    name = "broken.token_ratio_inverted"

    def token_tau(self, pb, u_accept):
        if pb.point_mass:
            return super().token_tau(pb, u_accept)
        accept = (u_accept * pb.at_draft(pb.target) < pb.at_draft(pb.draft)) & pb.draft_valid
        return torch.cumprod(accept.long(), dim=1).sum(dim=1)


kernel = TokenRatioInverted()
