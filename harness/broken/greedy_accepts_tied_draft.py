"""BUGS.md class 12 (relation: greedy rows exactly, issue 33): a greedy row accepts a draft whose
logit equals the row's maximum, ``logit[x] == max``, instead of only the lowest-index argmax; on a
tie a higher tied index is accepted where the argmax rule rejects it (emitted tokens are still
argmaxes). Expected catchers: ``law_consequences``, ``greedy_identity``, ``conditional_law``."""

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class GreedyAcceptsTiedDraft(TorchEagerKernel):
    name = "broken.greedy_accepts_tied_draft"

    def greedy_matches(self, pb, greedy_ids):
        logits = torch.nan_to_num(pb.logits[:, : pb.k_max], nan=-torch.inf)
        at_draft = logits.gather(-1, pb.draft_ids[..., None])[..., 0]
        return (at_draft == logits.max(dim=-1).values) & pb.draft_valid


kernel = GreedyAcceptsTiedDraft()
