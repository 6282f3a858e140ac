"""Deliberately broken kernels: the proof that the harness's checks have teeth.

Each entry is a small variant of a correct kernel (``harness.implementations.torch_eager``, which has
its own randomness and no ``random_draws``, so only the kernel-agnostic layers can judge it), living
in ``harness/broken/NAME.py`` as ``kernel`` and loadable as ``harness.broken.NAME:kernel`` by pytest,
the CLI and ``bench/teeth.py``. ``expected`` names the properties expected to catch it (the first is
the cheapest); ``bug`` names the BUGS.md class or SPEC.md trap it reproduces.

Entries with a ``fault`` (``crash`` or ``hang``) wrap the oracle instead (harness/broken/faulting.py):
they kill, exit or hang the process that calls them, so they are only ever run supervised
(harness/execution/supervisor.py), and ``devices`` says where the fault happens at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokenKernel:
    name: str
    bug: str
    expected: tuple[str, ...]
    fault: str = ""  # "crash" or "hang": the finding class it must produce (never run in process)
    devices: tuple[str, ...] = ("cpu", "cuda")

    @property
    def spec(self) -> str:
        return f"harness.broken.{self.name}:kernel"


CATALOGUE: tuple[BrokenKernel, ...] = (
    BrokenKernel(
        "reused_accept_uniform",
        "BUGS 1: acceptance uniform reused to sample the residual",
        ("conditional_law",),
    ),
    BrokenKernel(
        "wrong_row_residual",
        "BUGS 2: residual read from the next position's target row",
        ("conditional_law", "single_draft_block_equals_token"),
    ),
    BrokenKernel(
        "residual_from_target",
        "BUGS 3: residual resampled from the target, not (b - q)_+",
        ("law_consequences", "conditional_law", "marginal_law"),
    ),
    BrokenKernel(
        "residual_subtracts_draft_token_only",
        "BUGS 3: only q(x) subtracted (xllm#2175)",
        ("conditional_law",),
    ),
    BrokenKernel("bonus_from_last_draft_row", "BUGS 4: bonus token from the wrong row", ("conditional_law",)),
    BrokenKernel(
        "block_breaks_at_first_failure",
        "BUGS 5 / SPEC 2 trap: block scan stops at a failure",
        ("law_consequences", "conditional_law"),
    ),
    BrokenKernel(
        "block_clips_only_at_end",
        "BUGS 6 / SPEC 2 trap: min(1, prod r) instead of per-step clip",
        ("conditional_law", "marginal_law"),
    ),
    BrokenKernel(
        "block_uses_token_residual",
        "BUGS 7 / SPEC 2 trap: (b - q)_+ after a block rejection",
        ("law_consequences", "conditional_law"),
    ),
    BrokenKernel(
        "inclusive_compare_coarse_uniform",
        "BUGS 8: u == 0 possible and u*q <= b accepts p = 0 drafts",
        ("conditional_law", "structural"),
    ),
    BrokenKernel(
        "nan_row_emits_vocab_size",
        "BUGS 9: NaN / all -inf rows turned into id V",
        ("degenerate_rows_outcome", "structural"),
    ),
    BrokenKernel(
        "padded_tail_wins",
        "BUGS 10: vocab padded to 64 with logit 0.0 instead of -inf",
        ("structural", "conditional_law"),
    ),
    BrokenKernel(
        "greedy_last_index_tie",
        "BUGS 12: greedy argmax ties go to the last index",
        ("law_consequences", "conditional_law", "structural"),
    ),
    BrokenKernel(
        "tiny_temperature_overflow",
        "BUGS 13: exp(logits / T) without max-subtraction overflows",
        ("conditional_law", "logit_shift"),
    ),
    BrokenKernel(
        "quantised_exponential_noise",
        "BUGS 15: race noise from 1 - u rounded to 11 bits",
        ("first_token_law",),
    ),
    BrokenKernel(
        "accept_all",
        "BUGS 20: verification effectively off (every draft accepted)",
        ("conditional_law", "expected_accepted"),
    ),
    BrokenKernel(
        "constant_accept_uniform", "BUGS 20: a constant acceptance uniform (0.5)", ("conditional_law",)
    ),
    BrokenKernel("padding_zero", "BUGS 18: output padded with 0 instead of -1", ("structural",)),
    BrokenKernel(
        "num_emitted_excludes_final",
        "BUGS 18: num_emitted counts accepted drafts only",
        ("structural", "conditional_law"),
    ),
    BrokenKernel(
        "draft_temperature_ignored",
        "BUGS 19: draft rows not temperature-scaled (q differs from "
        "the distribution drafts were sampled from)",
        ("law_consequences", "conditional_law", "marginal_law", "equal_models_accept_all"),
    ),
    BrokenKernel(
        "randomness_keyed_by_chunk",
        "BUGS 17: randomness keyed by chunk index",
        ("chunk_invariance", "batch_invariance"),
    ),
    BrokenKernel(
        "one_uniform_per_request",
        "own: one acceptance uniform reused at every draft slot",
        ("conditional_law",),
    ),
    BrokenKernel(
        "block_ignores_residual_mass", "own: block h_i = p_i (Z_{i+1} ignored)", ("conditional_law",)
    ),
    BrokenKernel("temperature_applied_twice", "own: logits / T^2", ("conditional_law",)),
    BrokenKernel(
        "block_residual_mass_halved_16bit",
        "own (a mutant of our pass 2): Z_{i+1} / 2 for bf16 / fp16 logits only",
        ("conditional_law",),
    ),
    BrokenKernel(
        "segfault_on_large_batch",
        "own: SIGSEGV on batches with V > 40 and >= 2 requests",
        ("structural",),
        fault="crash",
    ),
    BrokenKernel(
        "exits_on_large_batch",
        "own: os._exit(3) on batches with V > 40 and >= 2 requests",
        ("structural",),
        fault="crash",
    ),
    BrokenKernel(
        "hangs_on_large_batch",
        "own: sleeps forever on batches with V > 40 and >= 2 requests",
        ("structural",),
        fault="hang",
    ),
    BrokenKernel(
        "cuda_oob_store",
        "own: an out-of-bounds Triton store (illegal address) on V > 40 and >= 2 requests",
        ("structural",),
        fault="crash",
        devices=("cuda",),
    ),
    # Issue 33: one per relation of harness/judging/consequences.py, each caught without coupling.
    BrokenKernel(
        "logprobs_ignore_temperature",
        "own (logprob value): sampled rows' logprobs from raw logits",
        ("law_consequences",),
    ),
    BrokenKernel(
        "greedy_accepts_tied_draft",
        "BUGS 12 (greedy rows exactly): a draft tied with the maximum is accepted",
        ("law_consequences", "greedy_identity", "conditional_law"),
    ),
    BrokenKernel(
        "residual_mask_tile_local",
        "BUGS 2 / 10 (correction never the rejected draft): point-mass residual masks x % 64",
        ("law_consequences",),
    ),
    BrokenKernel(
        "block_residual_unclipped_scale",
        "BUGS 6 (block correction inside (p_tau b - q)_+): residual scaled by the unclipped product",
        ("law_consequences", "conditional_law"),
    ),
    BrokenKernel(
        "token_ratio_inverted",
        "own (token never rejects b(x) > q(x)): u * b(x) < q(x) with draft logits",
        ("law_consequences", "conditional_law"),
    ),
    BrokenKernel(
        "block_takes_first_passing_slot",
        "BUGS 5 mirror (block keeps every slot up to the last p_i == 1): tau = first passing slot",
        ("law_consequences", "conditional_law", "equal_models_accept_all"),
    ),
    BrokenKernel(
        "block_mass_unscaled",
        "own (block never stops where h_i = 0): Z_{i+1} without the factor p_i",
        ("law_consequences", "conditional_law"),
    ),
)

NAMES = tuple(b.name for b in CATALOGUE)
