"""The crafted coupled cases still contain the rare event each one is built around."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.generation import crafted
from reference import rng


def test_tiny_uniform_seed_still_gives_a_uniform_below_two_to_minus_25():
    u = rng.sampling_uniforms([crafted.TINY_UNIFORM_SEED], [0], [0, 0], crafted.TINY_UNIFORM_VOCAB)[0]
    assert u[crafted.TINY_UNIFORM_INDEX] < 2.0**-25
    assert np.float32(1.0) - u[crafted.TINY_UNIFORM_INDEX] == np.float32(1.0)  # the float32 trap


def test_tiny_uniform_case_is_won_by_the_trap_neighbour():
    """The oracle emits the trap's neighbour, by a margin far outside the race tie tolerance."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    batch = build_batch(crafted.tiny_uniform_case("token"))
    result = run_reference(batch, *reference_draws(batch))
    assert result.output_token_ids[0, 0] == crafted.TINY_UNIFORM_INDEX + 1
    assert abs(result.sample_margins[0]) > 1.0


def test_high_eta_seed_is_within_1e3_of_one():
    eta = rng.accept_uniforms([crafted.HIGH_ETA_SEED], [0], [0, 1])[0]
    assert 1.0 - 1e-3 < eta < 1.0


def test_block_residual_seeds_exist_and_cases_build():
    assert len(crafted.block_residual_seeds()) == 2
    cases = crafted.crafted_cases({"token", "block"})
    assert [c.method for c in cases] == ["block"] * 2 + ["token"] * 4 + ["block"] * 4
    assert not crafted.crafted_cases(())
    assert all(c.label.startswith("crafted:") for c in cases)


def test_empty_residual_seed_rejects_the_draft():
    seed = crafted.empty_residual_seed()
    eta = rng.accept_uniforms([seed], [0], [0, 1])[0]
    assert np.log(np.float32(eta)) > -(2.0**-16)  # log u + log q(x) >= log b(x): rejected
    assert [c.method for c in crafted.crafted_cases({"token"})] == ["token"] * 6


def test_shared_mode_case_rejects_and_the_oracle_emits_the_mode():
    """The seed rejects the draft, and the float64 oracle's correction is the shared mode (token 0),
    which a residual formed from log(1 + tail) would leave empty."""
    from reference import verify

    eta = rng.accept_uniforms([crafted.SHARED_MODE_SEED], [0], [0, 1])[0]
    assert eta > np.exp(-30.0 + 17.0)  # u * q(x) >= b(x): rejected
    u = rng.sampling_uniforms([crafted.SHARED_MODE_SEED], [0], [0, 1], 8)
    result = verify.verify_batch(crafted._MODE_TARGET, crafted._MODE_DRAFT, np.array([1]), np.array([0, 1]),
                                 np.ones(1), np.array([eta], dtype=np.float32), u, "token")
    assert result.output_token_ids[0].tolist() == [0, -1]
    b, q = np.exp(crafted._MODE_TARGET[0]), np.exp(crafted._MODE_DRAFT[0])
    assert np.float32(b.sum()) == np.float32(q.sum()) == np.float32(1.0)  # the float32 trap


def test_deep_tail_case_emits_the_mode_by_hundreds_of_nats():
    """Requests 0 and 1 emit the shared mode 0 by hundreds of nats, request 2 a token in 2..7 by a
    margin no float32 tie tolerance covers, and request 0's draft tail is 0 in float32."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    case = crafted.deep_tail_case()
    batch = build_batch(case)
    result = run_reference(batch, *reference_draws(batch))
    assert result.output_token_ids[:, 0].tolist()[:2] == [0, 0]
    assert result.output_token_ids[2, 0] >= 2
    assert np.all(result.sample_margins[:2] > 300.0) and result.sample_margins[2] > 1e-2
    target, draft = crafted.deep_tail_logits()
    scaled = (draft[0].astype(np.float32) / np.float32(crafted.DEEP_TEMPERATURE))
    assert np.sum(np.exp(scaled[1:] - scaled[0]).astype(np.float32)) == 0.0  # the float32 trap


def test_ulp_mode_case_emits_the_mode_and_rounding_would_not():
    """Both seeds reject x and the oracle emits the mode 0 by > 0.5 nats, while tails taken as
    float32 (1 + tail) - 1 (3 and 4 ulps instead of 2.6 and 4.4) leave the mode 1 ulp and the race
    with the same uniforms picks token 2."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    batch = build_batch(crafted.ulp_mode_case())
    accept, sample = reference_draws(batch)
    result = run_reference(batch, accept, sample)
    assert result.output_token_ids[:, 0].tolist() == [0, 0] and result.num_emitted.tolist() == [1, 1]
    assert np.all(result.sample_margins > 0.5)
    ulp = np.float32(2.0**-23)
    rounded = [np.float32(np.float32(1.0) + np.float32(t * 2.0**-23)) - np.float32(1.0) for t in (2.6, 4.4)]
    assert rounded == [3 * ulp, 4 * ulp]
    exponentials = rng.exponential_from_uniform(np.asarray(sample)[0::2])  # row 0 of each request
    with np.errstate(divide="ignore"):
        rounded_weights = np.log(np.array([1.0, 0, 2.6, 0, 0, 0, 0, 0]) * 2.0**-23)
    assert np.all(np.argmax(rounded_weights - np.log(exponentials), axis=1) == 2)


def test_near_one_block_case_decides_within_float32_epsilon_of_p_equal_one():
    """h_1 = 0.503 while float32 rounds p_1 to 1: three seeds stop at tau = 0 (token 1) with
    eta_1 - h_1 in (0.1, 0.3), below the h_1 >= 0.8 of a Z rounded to 2^-24 and of 1 - p rounded
    to 0; two accept x_1 with h_1 - eta_1 in (0.1, 0.3), above the h_1 = 0 of a Z rounded to 0."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    batch = build_batch(crafted.near_one_block_case())
    result = run_reference(batch, *reference_draws(batch))
    assert result.num_emitted.tolist() == [1, 1, 1, 2, 2]
    assert result.output_token_ids[:, :2].tolist() == [[1, -1]] * 3 + [[0, 0]] * 2
    margins = result.accept_margins.reshape(5, 2)
    assert np.all((margins[:3, 0] > 0.1) & (margins[:3, 0] < 0.3))
    assert np.all((margins[3:, 0] < -0.1) & (margins[3:, 0] > -0.3))
    assert np.all(margins[:, 1] > 0.05)  # eta_2 > p_2 = e^-10: never accepts x_2
    p_1 = 1.0 / (1.0 + np.exp(-18.021826))
    assert np.float32(p_1) == np.float32(1.0) and 1.0 - p_1 > 1e-8  # the float32 trap
    assert 1.0 - p_1 < 2.0**-25  # below half an ulp of 1: float32 (1 - p) - 0 cannot hold it


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_close_draft_seeds_still_move_every_request_with_a_wrong_scale_of_z(dtype):
    """The oracle itself, with ``h`` computed from ``Z / 2`` (even requests) or ``2 Z`` (odd ones),
    emits another output on every request of the case, so a kernel with either bug fails it."""
    from harness.generation.cases import build_batch
    from reference import verify

    batch = build_batch(crafted.close_draft_block_case(dtype))
    assert batch.target_logits.dtype == dtype and batch.method == "block"
    k = crafted.CLOSE_DRAFT_K
    for r, seed in enumerate(crafted.CLOSE_DRAFT_SEEDS):
        rows, cu = slice(r * (k + 1), (r + 1) * (k + 1)), np.array([0, k])
        seeds, positions = np.array([seed]), np.array([0])
        args = (batch.target_logits[rows].double().numpy(),
                batch.draft_logits[r * k:(r + 1) * k].double().numpy(),
                batch.draft_token_ids[r * k:(r + 1) * k].numpy(), cu, np.array([1.0], dtype=np.float32),
                rng.accept_uniforms(seeds, positions, cu),
                rng.sampling_uniforms(seeds, positions, cu, batch.vocab_size), "block")
        right = verify.verify_batch(*args)
        wrong = verify.verify_batch(*args, residual_mass_scale=0.5 if r % 2 == 0 else 2.0)
        assert (right.output_token_ids.tolist(), right.num_emitted.tolist()) != (
            wrong.output_token_ids.tolist(), wrong.num_emitted.tolist()), (dtype, r, seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_race_order_case_wins_by_score_and_loses_by_bound(dtype):
    """Every request of the race-order case, with its logits in ``dtype``, emits the winner W in the
    float64 oracle, by a score margin far outside the race tie tolerance, while the runner-up L has
    the larger bound w / u by a margin far outside any pruning slack: ranking blocks by that bound
    picks L. L's column is the lower one (its block comes first)."""
    from harness.generation.cases import build_batch
    from harness.judging.oracle import reference_draws, run_reference

    assert crafted.RACE_ORDER_LOSER < crafted.RACE_ORDER_WINNER
    case = crafted.race_order_case("token", dtype)
    batch = build_batch(case)
    assert batch.target_logits.dtype == dtype
    result = run_reference(batch, *reference_draws(batch))
    assert result.output_token_ids[:, 0].tolist() == [crafted.RACE_ORDER_WINNER] * crafted.RACE_ORDER_REQUESTS
    assert np.all(np.abs(result.sample_margins) > 0.01)  # the race tie tolerance is 1e-4
    for r, ((seed, _), log_ratio) in enumerate(zip(crafted.race_order_design(),
                                                   crafted.race_order_log_ratios(dtype), strict=True)):
        u = rng.sampling_uniforms([seed], [0], [0, 0], crafted.RACE_ORDER_VOCAB)[0].astype(np.float64)
        u_win, u_lose = u[crafted.RACE_ORDER_WINNER], u[crafted.RACE_ORDER_LOSER]
        assert max(u_win, u_lose) < 0.115  # the design's window: both uniforms below 1/8 with room
        bound_gap = (log_ratio - np.log(u_lose)) - (0.0 - np.log(u_win))
        assert bound_gap > 0.01, (r, seed, bound_gap)  # nats; pruning slack is ~1e-3


def test_race_order_case_has_a_16bit_copy_per_claimed_dtype():
    labels = [c.label for c in crafted.crafted_cases({"token"}, {torch.float32, torch.bfloat16})]
    assert sum("race winner" in label for label in labels) == 2
    assert any(label.endswith("(bfloat16)") for label in labels)
