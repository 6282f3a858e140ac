"""What the harness feeds a kernel: the case model and everything that draws or builds cases.

``cases`` (the serialisable case description and its materialisation as a ``VerifyBatch``),
``strategies`` (Hypothesis strategies over the case space), ``logit_families`` (shapes of logit
rows), ``crafted`` (hand-built cases for known bug classes), ``malformations`` (ill-formed batches for
the bad-input checks), ``batch_edit`` (small edits of a batch: permutations, sub-batches).
"""
