"""A plain, independent PyTorch implementation of token, block and greedy verification.

It is the second correct kernel the harness is validated with (besides our Triton kernels): written
from SPEC.md alone, in float64, vectorised over requests with one short loop over draft slots. It has
its OWN randomness and no ``random_draws``, so only the kernel-agnostic properties (structure,
invariances, statistics) judge it. Each step is a method so that the deliberately broken kernels of
``harness.broken`` can each override exactly one of them.

Randomness: each request draws its accept (eta) uniforms and ``V`` sampling uniforms per row from a
``torch.Generator`` seeded by a 64-bit mix of (request seed, absolute position of its first row), in
an amount fixed by its own draft length, so values depend on neither the batch index, the batch mates
nor chunking (batch and chunk invariance hold).
Uniforms lie in (0, 1); the exponential race
``argmax_v log w_v - log E_v`` with ``E_v = -log(1 - u_v)`` samples from non-negative weights ``w``.

Degenerate rows (NaN, all ``-inf``) yield ids in ``[0, V)`` (NaN weights count as 0; an empty residual
falls back to the target row, an empty target row to id 0), per docs/interfaces.md section 3.
"""

from __future__ import annotations

import torch

from harness.contract import Capabilities, VerifyBatch, VerifyOutput

_MASK64 = (1 << 64) - 1
F64 = torch.float64


def mix64(seed: int, position: int) -> int:
    """splitmix64-style finaliser of (seed, position): a well-spread 64-bit generator seed."""
    z = (seed * 0x9E3779B97F4A7C15 + position * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class Padded:
    """A batch regrouped per request and padded to ``K = max k`` (all float64, on the CPU).

    ``target [R, K+1, V]``, ``draft [R, K, V]`` (one-hot for point masses), ``draft_ids [R, K]``,
    ``lengths [R]``, ``draft_valid [R, K]``, ``logits [R, K+1, V]`` raw target logits, ``greedy [R]``,
    ``logit_dtype`` the dtype the logits arrived in, ``point_mass`` whether drafts are point masses.
    """

    def __init__(self, batch: VerifyBatch, kernel: TorchEagerKernel):
        cu = batch.cu_num_draft_tokens.to("cpu", torch.int64)
        self.lengths = cu[1:] - cu[:-1]
        self.num_reqs, self.vocab = self.lengths.numel(), batch.vocab_size
        self.logit_dtype = batch.target_logits.dtype
        self.k_max = int(self.lengths.max()) if self.num_reqs else 0
        slot = torch.arange(self.k_max + 1)
        row_valid = slot[None, :] <= self.lengths[:, None]
        self.draft_valid = slot[None, : self.k_max] < self.lengths[:, None]
        first_row = cu[:-1] + torch.arange(self.num_reqs)
        target_index = torch.where(row_valid, first_row[:, None] + slot[None, :], 0)
        draft_index = torch.where(self.draft_valid, cu[:-1, None] + slot[None, : self.k_max], 0)

        self.logits = batch.target_logits.to("cpu", F64)[target_index]
        temperature = batch.temperature.to("cpu", F64)
        self.greedy = temperature == 0
        self.temperature = torch.where(self.greedy, 1.0, temperature)
        self.target = kernel.target_probabilities(self.logits, self.temperature)
        self.point_mass = batch.draft_logits is None
        ids = batch.draft_token_ids.to("cpu", torch.int64)
        self.draft_ids = (
            torch.where(self.draft_valid, ids[draft_index], 0)
            if ids.numel()
            else torch.zeros(self.num_reqs, self.k_max, dtype=torch.int64)
        )
        if batch.draft_logits is None:
            self.draft = torch.nn.functional.one_hot(self.draft_ids, self.vocab).to(F64)
        else:
            draft_logits = batch.draft_logits.to("cpu", F64)[draft_index]
            self.draft = kernel.draft_probabilities(draft_logits, self.temperature)
        self.rows = torch.arange(self.num_reqs)

    def at_draft(self, probs: torch.Tensor) -> torch.Tensor:
        """``probs[r, j, x_{j+1}]`` for the first ``K`` rows of ``probs``: ``[R, K]``."""
        return probs[:, : self.k_max].gather(-1, self.draft_ids[..., None])[..., 0]


class TorchEagerKernel:
    """Token, block and greedy verification in eager PyTorch (float64); see the module docstring."""

    name = "torch_eager"
    methods = frozenset({"token", "block"})
    capabilities = Capabilities(
        point_mass_drafts=True,
        greedy=True,
        logprobs=True,
        chunking=False,
        dtypes=frozenset({torch.float32, torch.bfloat16, torch.float16}),
    )

    # -- probabilities -------------------------------------------------------------------------
    def target_probabilities(self, logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
        """``softmax(logits / T)`` per row (``temperature [R]``); exact zeros for ``-inf`` logits."""
        return torch.softmax(logits / temperature[:, None, None], dim=-1)

    def draft_probabilities(self, logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
        """The draft rows get the same temperature as the target rows."""
        return torch.softmax(logits / temperature[:, None, None], dim=-1)

    # -- randomness ----------------------------------------------------------------------------
    def uniforms(self, batch: VerifyBatch, k_max: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Accept uniforms ``[R, k_max]`` and sampling uniforms ``[R, k_max + 1, V]`` in (0, 1).

        Request ``r`` draws ``(k_r + 1) x (V + 1)`` values (per row: its accept uniform, then its ``V``
        sampling uniforms) from a generator seeded by ``mix64(seed_r, positions_r)``: a pure function
        of the request alone (padding rows beyond ``k_r`` stay at 0.5 and are never used).
        """
        seeds, positions = batch.seeds.tolist(), batch.positions.tolist()
        lengths = batch.draft_lengths()
        draws = torch.full((len(seeds), k_max + 1, vocab + 1), 0.5, dtype=F64)
        gen = torch.Generator(device="cpu")
        for r, (seed, pos, k) in enumerate(zip(seeds, positions, lengths, strict=True)):
            gen.manual_seed(mix64(seed & _MASK64, pos & _MASK64))
            draws[r, : k + 1] = torch.rand(k + 1, vocab + 1, generator=gen, dtype=F64)
        # torch.rand lies in [0, 1): an exact 0 must never accept (SPEC.md section 6).
        draws.clamp_(min=torch.finfo(F64).tiny)
        return draws[:, :k_max, 0].contiguous(), draws[:, :, 1:].contiguous()

    def race(self, weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        """One index per row with probability proportional to ``weights`` (exponential race); zero
        weights never win; ties go to the lowest index. Rows without positive weight give -1."""
        exp_noise = -torch.log1p(-uniforms)
        score = torch.where(weights > 0, torch.log(weights) - torch.log(exp_noise), -torch.inf)
        ids = torch.argmax(score, dim=-1)
        return torch.where(torch.isfinite(score.max(dim=-1).values), ids, -1)

    # -- token verification (SPEC.md section 1) ------------------------------------------------
    def token_accepts(self, u: torch.Tensor, q_x: torch.Tensor, b_x: torch.Tensor) -> torch.Tensor:
        return u * q_x < b_x

    def token_tau(self, pb: Padded, u_accept: torch.Tensor) -> torch.Tensor:
        accept = self.token_accepts(u_accept, pb.at_draft(pb.draft), pb.at_draft(pb.target)) & pb.draft_valid
        return torch.cumprod(accept.long(), dim=1).sum(dim=1)

    def token_residual(self, pb: Padded, tau: torch.Tensor) -> torch.Tensor:
        """``(b_{tau+1} - q_{tau+1})_+`` (meaningful where ``tau < k``)."""
        at = tau.clamp(max=max(pb.k_max - 1, 0))
        if pb.k_max == 0:
            return pb.target[:, 0]
        return (pb.target[pb.rows, at] - pb.draft[pb.rows, at]).clamp(min=0.0)

    # -- block verification (SPEC.md section 2) ------------------------------------------------
    def block_ratios(self, pb: Padded) -> torch.Tensor:
        """``p [R, K+1]`` with ``p_0 = 1`` and ``p_i = min(p_{i-1} b_i(x_i) / q_i(x_i), 1)``, clipped at
        every step (``q(x) == 0`` is an infinite ratio when ``p b(x) > 0``, else 0)."""
        p = torch.ones(pb.num_reqs, pb.k_max + 1, dtype=F64)
        b_x, q_x = pb.at_draft(pb.target), pb.at_draft(pb.draft)
        for i in range(1, pb.k_max + 1):
            num, den = p[:, i - 1] * b_x[:, i - 1], q_x[:, i - 1]
            ratio = torch.where(
                den > 0, num / torch.where(den > 0, den, 1.0), torch.where(num > 0, torch.inf, 0.0)
            )
            p[:, i] = torch.where(pb.draft_valid[:, i - 1], ratio.clamp(max=1.0), 0.0)
        return p

    def residual_masses(self, pb: Padded, p: torch.Tensor) -> torch.Tensor:
        """``Z [R, K]``: ``Z[:, i] = sum_v (p_i b_{i+1} - q_{i+1})_+`` (``K >= 1``)."""
        return (p[:, : pb.k_max, None] * pb.target[:, : pb.k_max] - pb.draft).clamp(min=0.0).sum(-1)

    def block_stop_probabilities(self, pb: Padded, p: torch.Tensor) -> torch.Tensor:
        """``h [R, K+1]`` (index 0 unused): ``h_i = Z_{i+1} / (Z_{i+1} + 1 - p_i)``, 1 on a zero
        denominator, and ``h_k = p_k`` at each request's last draft slot."""
        h = torch.zeros(pb.num_reqs, pb.k_max + 1, dtype=F64)
        if pb.k_max == 0:
            return h
        z = self.residual_masses(pb, p)
        for i in range(1, pb.k_max + 1):
            if i < pb.k_max:
                den = z[:, i] + 1.0 - p[:, i]
                h[:, i] = torch.where(den > 0, z[:, i] / torch.where(den > 0, den, 1.0), 1.0)
            h[:, i] = torch.where(pb.lengths == i, p[:, i], h[:, i])
        return h

    def block_tau(self, pb: Padded, h: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
        """``tau = max{i : eta_i <= h_i}`` over ALL slots (never break), 0 if none."""
        tau = torch.zeros(pb.num_reqs, dtype=torch.int64)
        for i in range(1, pb.k_max + 1):
            passes = (eta[:, i - 1] <= h[:, i]) & pb.draft_valid[:, i - 1]
            tau = torch.where(passes, i, tau)
        return tau

    def block_residual(self, pb: Padded, p: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """``(p_tau b_{tau+1} - q_{tau+1})_+`` (meaningful where ``tau < k``)."""
        if pb.k_max == 0:
            return pb.target[:, 0]
        at = tau.clamp(max=pb.k_max - 1)
        return (p[pb.rows, tau, None] * pb.target[pb.rows, at] - pb.draft[pb.rows, at]).clamp(min=0.0)

    # -- greedy and the final token ------------------------------------------------------------
    def greedy_ids(self, logits: torch.Tensor) -> torch.Tensor:
        """Lowest-index argmax of raw logits per row (NaN counts as -inf)."""
        return torch.argmax(torch.nan_to_num(logits, nan=-torch.inf), dim=-1)

    def greedy_matches(self, pb: Padded, greedy_ids: torch.Tensor) -> torch.Tensor:
        """``[R, K]``: a greedy row accepts its draft iff it is the row's (lowest-index) argmax."""
        return (pb.draft_ids == greedy_ids[:, : pb.k_max]) & pb.draft_valid

    def logprob_rows(self, pb: Padded) -> torch.Tensor:
        """``log_softmax(logits / T)`` of every target row (``T = 1`` for greedy rows): ``[R, K+1, V]``."""
        return torch.log_softmax(pb.logits / pb.temperature[:, None, None], dim=-1)

    def bonus_row(self, pb: Padded) -> torch.Tensor:
        """``b_{k+1}``: the target row after the request's last draft."""
        return pb.target[pb.rows, pb.lengths]

    def final_token(
        self,
        pb: Padded,
        weights: torch.Tensor,
        u_row: torch.Tensor,
        tau: torch.Tensor,
        u_accept: torch.Tensor,
    ) -> torch.Tensor:
        """Sample the correction/bonus from ``weights`` with the emitting row's uniforms ``u_row``;
        an empty residual falls back to the target row of that position, then to id 0."""
        sampled = self.race(weights, u_row)
        fallback = self.race(torch.nan_to_num(pb.target[pb.rows, tau], nan=0.0), u_row)
        return torch.where(sampled >= 0, sampled, fallback).clamp(min=0)

    def assemble(
        self, pb: Padded, tau: torch.Tensor, final: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``output_token_ids`` (drafts, final token, -1 padding) and ``num_emitted = tau + 1``."""
        out = torch.full((pb.num_reqs, pb.k_max + 1), -1, dtype=torch.int64)
        accepted = torch.arange(pb.k_max)[None, :] < tau[:, None]
        out[:, : pb.k_max] = torch.where(accepted, pb.draft_ids, -1)
        out[pb.rows, tau] = final
        return out, (tau + 1).to(torch.int32)

    # -- the whole verification ----------------------------------------------------------------
    def verify(self, batch: VerifyBatch) -> VerifyOutput:
        if batch.method not in self.methods:
            raise ValueError(f"unknown method {batch.method!r}")
        pb = Padded(batch, self)
        u_accept, u_sample = self.uniforms(batch, pb.k_max, pb.vocab)
        if batch.method == "token":
            tau = self.token_tau(pb, u_accept)
            residual = self.token_residual(pb, tau)
        else:
            p = self.block_ratios(pb)
            tau = self.block_tau(pb, self.block_stop_probabilities(pb, p), u_accept)
            residual = self.block_residual(pb, p, tau)
        weights = torch.where((tau == pb.lengths)[:, None], self.bonus_row(pb), residual)
        weights = torch.nan_to_num(weights, nan=0.0).clamp(min=0.0)
        sampled = self.final_token(pb, weights, u_sample[pb.rows, tau], tau, u_accept)

        greedy_ids = self.greedy_ids(pb.logits)  # [R, K+1]
        matches = self.greedy_matches(pb, greedy_ids)
        greedy_tau = torch.cumprod(matches.long(), dim=1).sum(dim=1)
        tau = torch.where(pb.greedy, greedy_tau, tau)
        final = torch.where(pb.greedy, greedy_ids[pb.rows, tau], sampled)

        out, num_emitted = self.assemble(pb, tau, final)
        result = VerifyOutput(out.to(batch.device), num_emitted.to(batch.device))
        if batch.want_logprobs:
            logp = self.logprob_rows(pb)
            picked = logp.gather(-1, out.clamp(min=0)[:, :, None])[..., 0]
            emitted = torch.arange(pb.k_max + 1)[None, :] <= tau[:, None]
            result.logprobs = torch.where(emitted, picked, 0.0).to(torch.float32).to(batch.device)
        return result


kernel = TorchEagerKernel()
