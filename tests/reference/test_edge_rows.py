"""Degenerate and extreme rows: no NaN-driven or out-of-range id, documented outcomes, exact laws finite."""

from __future__ import annotations

import numpy as np
import pytest

from reference import laws, rng, verify
from tests.reference._models import concat_requests
from tests.reference._structure import check_structure, check_support

V = 9


def _coins(n_reqs, cu, seed=0):
    gen = np.random.default_rng(seed)
    seeds, positions = gen.integers(-(2**62), 2**62, n_reqs), gen.integers(0, 2**40, n_reqs)
    return dict(
        accept_uniforms=rng.accept_uniforms(seeds, positions, cu),
        sampling_uniforms=rng.sampling_uniforms(seeds, positions, cu, V),
    )


def _edge_requests(gen: np.random.Generator, magnitude: float):
    """A menagerie of (target, draft, ids) requests; ragged, k=0 included."""
    reqs = []
    for k in (0, 1, 3, 4):
        target = gen.normal(scale=magnitude, size=(k + 1, V))
        draft = gen.normal(scale=magnitude, size=(k, V))
        reqs.append((target, draft, gen.integers(0, V, k)))
    masked_t = np.where(gen.random((4, V)) < 0.6, -np.inf, gen.normal(scale=magnitude, size=(4, V)))
    masked_t[:, 0] = magnitude  # at least one finite logit per row
    masked_d = np.where(gen.random((3, V)) < 0.6, -np.inf, gen.normal(scale=magnitude, size=(3, V)))
    masked_d[:, 1] = 0.0
    reqs.append((masked_t, masked_d, np.array([1, 2, 3])))  # draft tokens with b = 0 and/or q = 0
    single = np.full((3, V), -np.inf)
    single[:, 4] = -magnitude
    reqs.append((single, np.zeros((2, V)), np.array([4, 5])))  # one finite logit: b is a point mass
    same = gen.normal(scale=magnitude, size=(4, V))
    reqs.append((same, same[:3].copy(), np.argmax(same[:3], axis=1)))  # p == q, drafts in q's support
    return reqs


@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("magnitude", [1.0, 1e4])
@pytest.mark.parametrize("temperature", [1e-8, 1e-4, 0.5, 1.0, 100.0, 0.0])
@pytest.mark.parametrize("point_mass", [False, True])
def test_extreme_rows_give_valid_outputs_and_finite_laws(method, magnitude, temperature, point_mass):
    gen = np.random.default_rng(123)
    reqs = _edge_requests(gen, magnitude)
    if point_mass:
        reqs = [(t, None, x) for t, _, x in reqs]
    batch = concat_requests(reqs)
    n = len(reqs)
    batch.update(
        temperature=np.full(n, temperature, dtype=np.float32), **_coins(n, batch["cu_num_draft_tokens"])
    )
    result = verify.verify_batch(**batch, method=method, want_logprobs=True)
    check_structure(result, batch)
    check_support(result, batch)
    assert not np.isnan(result.logprobs).any()
    for target, draft, ids in reqs:
        law = laws.conditional_law(target, draft, ids, np.float32(temperature), method)
        assert np.isfinite(law).all() and abs(law.sum() - 1) < 1e-9 and law.min() >= 0
    masked = 4  # target probability 0 on a draft token: never accepted (check_support covers all rows)
    zero_b = np.isneginf(reqs[masked][0][np.arange(3), reqs[masked][2]])
    assert zero_b.any() and not zero_b[: result.num_emitted[masked] - 1].any()
    same = 6  # p == q: every draft accepted
    assert result.num_emitted[same] == 4 or point_mass


@pytest.mark.parametrize("method", ["token", "block"])
@pytest.mark.parametrize("bad", ["nan_target", "all_neg_inf_target", "nan_draft", "inf_draft"])
def test_nan_and_empty_rows_never_give_out_of_range_ids(method, bad):
    gen = np.random.default_rng(7)
    reqs = _edge_requests(gen, 1.0)
    for t, d, _ in reqs:
        if bad == "nan_target":
            t[gen.random(t.shape) < 0.3] = np.nan
        elif bad == "all_neg_inf_target":
            t[-1] = -np.inf
        elif bad == "nan_draft":
            d[gen.random(d.shape) < 0.3] = np.nan
        else:
            d[:] = -np.inf
    batch = concat_requests(reqs)
    n = len(reqs)
    batch.update(
        temperature=np.array([0.7, 1.0, 0.0, 2.0, 1.0, 1.0, 0.3], dtype=np.float32),
        **_coins(n, batch["cu_num_draft_tokens"], seed=3),
    )
    check_structure(verify.verify_batch(**batch, method=method, want_logprobs=True), batch)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_low_precision_logits_are_upcast(dtype):
    gen = np.random.default_rng(11)
    reqs = [
        (gen.normal(size=(4, V)).astype(dtype), gen.normal(size=(3, V)).astype(dtype), gen.integers(0, V, 3))
    ]
    batch = concat_requests(reqs * 50)
    batch.update(temperature=np.ones(50, np.float32), **_coins(50, batch["cu_num_draft_tokens"]))
    a = verify.verify_batch(**batch, method="block")
    upcast = dict(
        batch,
        target_logits=batch["target_logits"].astype(np.float64),
        draft_logits=batch["draft_logits"].astype(np.float64),
    )
    b = verify.verify_batch(**upcast, method="block")
    np.testing.assert_array_equal(a.output_token_ids, b.output_token_ids)


def test_greedy_ties_go_to_the_lowest_index():
    target = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    batch = dict(
        target_logits=target,
        draft_logits=None,
        draft_token_ids=np.array([1]),
        cu_num_draft_tokens=np.array([0, 1]),
        temperature=np.zeros(1),
        accept_uniforms=np.full(1, 0.5),
        sampling_uniforms=np.full((2, 4), 0.5),
    )
    result = verify.verify_batch(**batch, method="block")
    np.testing.assert_array_equal(result.output_token_ids, [[1, 0]])
    assert result.sample_margins[0] == 0.0  # an exact tie is reported as margin 0
    laws_out = laws.conditional_law(target, None, [2], 0.0, "token")
    assert laws_out[0, 1] == 1.0  # draft 2 loses the tie to index 1


def test_structure_checks_can_fail():
    """Broken outputs (id == V, wrong padding, wrong prefix, zero-probability token) are caught."""
    gen = np.random.default_rng(5)
    reqs = _edge_requests(gen, 1.0)
    batch = concat_requests(reqs)
    batch.update(
        temperature=np.ones(len(reqs), np.float32), **_coins(len(reqs), batch["cu_num_draft_tokens"])
    )
    good = verify.verify_batch(**batch, method="token")
    check_structure(good, batch)
    r = int(np.argmax(good.num_emitted > 1))
    for corrupt in ("id_V", "padding", "prefix"):
        bad = verify.ReferenceResult(**{**good.__dict__, "output_token_ids": good.output_token_ids.copy()})
        n = bad.num_emitted[r]
        if corrupt == "id_V":
            bad.output_token_ids[r, n - 1] = V
        elif corrupt == "padding":
            bad.output_token_ids[r, -1] = 0 if n < bad.output_token_ids.shape[1] else V
        else:
            bad.output_token_ids[r, 0] = (bad.output_token_ids[r, 0] + 1) % V
        with pytest.raises(AssertionError):
            check_structure(bad, batch)
    masked = 4  # emitting a zero-probability token is caught
    bad = verify.ReferenceResult(**{**good.__dict__, "output_token_ids": good.output_token_ids.copy()})
    zero_col = int(np.flatnonzero(np.isneginf(reqs[masked][0][good.num_emitted[masked] - 1]))[0])
    bad.output_token_ids[masked, good.num_emitted[masked] - 1] = zero_col
    with pytest.raises(AssertionError):
        check_support(bad, batch)


@pytest.mark.parametrize("field", ["ids_out_of_range", "rows", "cu", "temperature", "method"])
def test_malformed_inputs_raise_value_error(field):
    batch = dict(
        target_logits=np.zeros((3, 4)),
        draft_logits=None,
        draft_token_ids=np.array([1, 2]),
        cu_num_draft_tokens=np.array([0, 2]),
        temperature=np.ones(1),
        accept_uniforms=np.full(2, 0.5),
        sampling_uniforms=np.full((3, 4), 0.5),
        method="token",
    )
    if field == "ids_out_of_range":
        batch["draft_token_ids"] = np.array([1, 4])
    elif field == "rows":
        batch["target_logits"] = np.zeros((2, 4))
    elif field == "cu":
        batch["cu_num_draft_tokens"] = np.array([1, 2])
    elif field == "temperature":
        batch["temperature"] = np.array([-1.0])
    else:
        batch["method"] = "typical"
    with pytest.raises(ValueError):
        verify.verify_batch(**batch)
