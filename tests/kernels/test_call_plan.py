"""Call plans (kernels/call_plan.py): a repeated small layout runs its kept plan, bit for bit the full
path's result; the plan still checks every value; any metadata change misses it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels import call_plan
from kernels.chunking import kept_plans, release_workspaces
from tests.kernels._batches import DEVICE, assert_same_outputs, make_batch
from tests.kernels.test_structure import SUMMARY_KERNEL, _bad_inputs

LAYOUTS = {
    "one request": [3],
    "ragged, fixed geometry": [2, 0, 3],
    # widths 11-21 straddle the ROWS bucket 16 / 32: the verification launch is bound per checked width
    "ragged, width-dependent geometry": [20, 0],
}


@pytest.fixture
def plan_runs(monkeypatch):
    """How many calls ran a kept plan."""
    runs = []
    real = call_plan.CallPlan.run

    def run(self, *args):
        runs.append(self)
        return real(self, *args)

    monkeypatch.setattr(call_plan.CallPlan, "run", run)
    return runs


@pytest.fixture
def replays(monkeypatch):
    """The ReplayPlan runs, and the widths each one launched the full path's way (recording them)."""
    runs, recorded = [], []
    real_run, real_steps = call_plan.ReplayPlan.run, call_plan.ReplayPlan.replay_steps

    def run(self, *args):
        runs.append(self)
        return real_run(self, *args)

    def replay_steps(self, launches, tensors):
        recorded.append(tensors[7].shape[1])
        return real_steps(self, launches, tensors)

    monkeypatch.setattr(call_plan.ReplayPlan, "run", run)
    monkeypatch.setattr(call_plan.ReplayPlan, "replay_steps", replay_steps)
    return runs, recorded


METHODS = pytest.mark.parametrize("method,with_draft,want_logprobs",
                                  [("token", True, True), ("block", True, False), ("block", False, True)])
LENGTHS_ON_HOST = pytest.mark.parametrize("lengths_on_host", [False, True])


def _call(batch, lengths_on_host, **kwargs):
    lengths = list(batch.lengths) if lengths_on_host else None
    return kernels.rejection_sample(*batch.args(), draft_lengths=lengths, **kwargs)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@METHODS
@LENGTHS_ON_HOST
def test_a_repeated_layout_runs_its_plan_bit_for_bit(layout, method, with_draft, want_logprobs,
                                                     lengths_on_host, kernel_setting, plan_runs):
    lengths = LAYOUTS[layout]
    seed = 4100
    print("seeds", seed, seed + 1)
    first, later = (make_batch(seed + i, lengths=lengths, vocab=40, with_draft=with_draft) for i in range(2))
    kwargs = dict(method=method, want_logprobs=want_logprobs)
    kernel_setting(call_plan, "ENABLED", False)
    want = _call(later, lengths_on_host, **kwargs)
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    _call(first, lengths_on_host, **kwargs)  # full path: keeps the plan
    assert len(kept_plans()) == 1 and not plan_runs
    got = _call(later, lengths_on_host, **kwargs)
    assert len(plan_runs) == 1, "the repeated layout did not run its plan"
    assert_same_outputs(want, got, (layout, method, with_draft, want_logprobs, lengths_on_host))


def test_a_plan_follows_the_checked_width(kernel_setting, plan_runs):
    """Same layout (shapes), different draft lengths: the width, and here the geometry, change."""
    wide, narrow = make_batch(4200, lengths=[20, 0], vocab=40), make_batch(4201, lengths=[10, 10], vocab=40)
    kernel_setting(call_plan, "ENABLED", False)
    want = kernels.rejection_sample(*narrow.args(), method="block")
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    kernels.rejection_sample(*wide.args(), method="block")
    got = kernels.rejection_sample(*narrow.args(), method="block")
    assert len(plan_runs) == 1 and got[0].shape == (2, 11)
    assert_same_outputs(want, got, "narrow after wide")


@pytest.mark.parametrize("batch,kwargs,name", _bad_inputs())
def test_bad_input_after_a_good_call_of_the_layout(batch, kwargs, name, kernel_launches):
    """Every bad input of the structural test, right after the well-formed batch of the same layout
    kept its plan: metadata changes miss the plan, value errors are caught by the plan's own checks;
    either way a ValueError naming the argument, and no launch but the value summary."""
    method = kwargs.pop("method", "token")
    release_workspaces()
    good = make_batch(25, lengths=[2, 1], vocab=16)
    extra = {key: value for key, value in kwargs.items() if key == "draft_lengths"}
    if extra:
        kernels.rejection_sample(*good.args(), draft_lengths=[2, 1])
    else:
        kernels.rejection_sample(*good.args())
    assert len(kept_plans()) == 1
    kernel_launches.clear()
    with pytest.raises(ValueError, match=name):
        kernels.rejection_sample(*batch.args(), method=method, **kwargs)
    assert set(kernel_launches) <= {SUMMARY_KERNEL}, f"raised after a launch: {kernel_launches}"


def _assert_value_errors(good, edits) -> None:
    """Each ``(field, values)`` edit of ``good`` raises a ValueError naming that field."""
    for field, value in edits:
        bad = good.clone()
        setattr(bad, field, torch.tensor(value, dtype=getattr(bad, field).dtype, device=DEVICE))
        with pytest.raises(ValueError, match=field):
            kernels.rejection_sample(*bad.args())


def test_value_errors_are_caught_by_the_plan(plan_runs):
    """The bad-input test above can fail to reach the plan; these value errors must go through it."""
    release_workspaces()
    good = make_batch(25, lengths=[2, 1], vocab=16)
    kernels.rejection_sample(*good.args())
    _assert_value_errors(good, (("draft_token_ids", [0, 16, 3]), ("temperature", [1.0, float("nan")]),
                                ("cu_num_draft_tokens", [0, 2, 1])))
    assert len(plan_runs) == 3
    kernels.rejection_sample(*good.args(), draft_lengths=[2, 1])
    with pytest.raises(ValueError, match="draft_lengths"):
        kernels.rejection_sample(*good.args(), draft_lengths=[3, 0, 0])
    with pytest.raises(ValueError, match="draft_lengths"):
        kernels.rejection_sample(*good.args(), draft_lengths=np.array([4, -1]))
    assert len(plan_runs) == 5


def test_the_key_covers_what_the_metadata_checks_read():
    """Every metadata change gives another key (or the full path); legal changes too (a new plan)."""
    good = make_batch(25, lengths=[2, 1], vocab=16)
    args = good.args()
    plain = ("token", 1 << 30, False, False)
    base = call_plan.layout_key(*args, *plain)
    assert base is not None and base == call_plan.layout_key(*good.clone().args(), *plain)
    t, d, ids, cu, temp, seeds, pos = args
    changed = {
        "target dtype": (t.half(), d.half(), ids, cu, temp, seeds, pos),
        "target stride": (t.t().contiguous().t(), d, ids, cu, temp, seeds, pos),
        "target alignment": (torch.cat([t.new_zeros(1), t.flatten()])[1:].view(t.shape), d, ids, cu, temp,
                             seeds, pos),
        "no draft logits": (t, None, ids, cu, temp, seeds, pos),
        "ids dtype": (t, d, ids.int(), cu, temp, seeds, pos),
        "cu dtype": (t, d, ids, cu.long(), temp, seeds, pos),
        "temperature dtype": (t, d, ids, cu, temp.double(), seeds, pos),
        "temperature stride": (t, d, ids, cu, torch.stack([temp, temp], 1)[:, 0], seeds, pos),
        "seeds dtype": (t, d, ids, cu, temp, seeds.int(), pos),
        "positions shape": (t, d, ids, cu, temp, seeds, pos[:1]),
    }
    one = make_batch(27, lengths=[2], vocab=16).args()
    expanded = (*one[:4], torch.tensor(1.0).expand(1), *one[5:])
    sparse = (*one[:4], torch.ones(1).to_sparse(), *one[5:])
    assert expanded[4].stride() == sparse[4].stride() == (0,)
    assert call_plan.layout_key(*expanded, *plain) != call_plan.layout_key(*sparse, *plain)
    for what, changed_args in changed.items():
        assert call_plan.layout_key(*changed_args, *plain) != base, what
    for extra in (("block", 1 << 30, False, False), ("token", None, False, False),
                  ("token", 1 << 30, True, False), ("token", 1 << 30, False, True)):
        assert call_plan.layout_key(*args, *extra) != base, extra
    for odd in (("token", True, False, False), ("token", 1 << 30, 1, False),
                (["token"], 1 << 30, False, False)):
        assert call_plan.layout_key(*args, *odd) is None, odd  # check_metadata rejects or must look
    assert call_plan.layout_key(t, d, ids.tolist(), cu, temp, seeds, pos, "token", 1, False, False) is None


def test_plans_are_kept_dropped_and_switched_off(kernel_setting, plan_runs):
    good = make_batch(25, lengths=[2, 1], vocab=16)
    release_workspaces()
    kernels.rejection_sample(*good.args())
    assert len(kept_plans()) == 1
    release_workspaces()
    assert not kept_plans()
    kernel_setting(call_plan, "ENABLED", False)
    kernels.rejection_sample(*good.args())
    kernels.rejection_sample(*good.args())
    assert not kept_plans() and not plan_runs
    kernel_setting(call_plan, "ENABLED", True)
    kernels.rejection_sample(*good.args())
    assert not plan_runs and len(kept_plans()) == 1
    many = make_batch(26, lengths=[1] * 5, vocab=16)  # 5 requests: not a small batch, a replay plan
    kernels.rejection_sample(*many.args())
    assert len(kept_plans()) == 2 and isinstance(list(kept_plans().values())[-1], call_plan.ReplayPlan)
    kernel_setting(call_plan, "ENABLED", False)
    kernels.rejection_sample(*many.args())
    assert not plan_runs


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("vocab,dtype", [(32000, torch.bfloat16), (262144, torch.float32)])
@pytest.mark.parametrize("method,with_draft", [("token", True), ("block", True), ("token", False)])
def test_gpu_plans_launch_directly_and_match_the_full_path(vocab, dtype, method, with_draft, kernel_setting,
                                                           plan_runs):
    """On the GPU the plan's launches call the compiled kernels directly (checked against Triton's
    specialisation under SPECFUZZ_FAST_LAUNCH_CHECK=1, as in every pytest run), and five calls with
    new values each equal the full path bit for bit."""
    batches = [make_batch(4300 + i, lengths=[8], vocab=vocab, dtype=dtype, with_draft=with_draft,
                          device="cuda") for i in range(6)]
    kernel_setting(call_plan, "ENABLED", False)
    want = [kernels.rejection_sample(*b.args(), method=method, want_logprobs=True) for b in batches[1:]]
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    kernels.rejection_sample(*batches[0].args(), method=method, want_logprobs=True)
    (plan,) = kept_plans().values()
    assert plan.summary.kernel.direct and plan.small_batch(9).direct
    for i, batch in enumerate(batches[1:]):
        got = kernels.rejection_sample(*batch.args(), method=method, want_logprobs=True)
        assert_same_outputs(want[i], got, i)
    assert len(plan_runs) == 5


def test_tensors_without_strides_take_the_full_path():
    """Sparse logits after a good call of the layout: the metadata check's ValueError, not an error
    from computing the plan key (sparse tensors have no strides or data pointer)."""
    good = make_batch(25, lengths=[2, 1], vocab=16)
    kernels.rejection_sample(*good.args())
    sparse = good.clone()
    sparse.target_logits = good.target_logits.to_sparse()
    assert call_plan.layout_key(*sparse.args(), "token", 1 << 30, False, False) is None
    with pytest.raises(ValueError, match="target_logits"):
        kernels.rejection_sample(*sparse.args())



REPLAY_LAYOUTS = {
    "five equal": [2] * 5,
    "ragged with empty drafts": [3, 0, 2, 1, 4, 0, 2],
}


@pytest.mark.parametrize("layout,lengths_on_host",
                         [("five equal", False), ("ragged with empty drafts", True)])
@METHODS
def test_a_repeated_larger_layout_replays_its_launches_bit_for_bit(layout, method, with_draft, want_logprobs,
                                                                  lengths_on_host, kernel_setting, replays):
    """More than 4 requests: the first call keeps a ReplayPlan, the second records its launches, the
    third and fourth replay them with their own tensors; every result equals the full path's."""
    runs, recorded = replays
    lengths = REPLAY_LAYOUTS[layout]
    seed = 4400
    print("seeds", seed, "..", seed + 3)
    batches = [make_batch(seed + i, lengths=lengths, vocab=24, with_draft=with_draft) for i in range(4)]
    kwargs = dict(method=method, want_logprobs=want_logprobs)
    kernel_setting(call_plan, "ENABLED", False)
    want = [_call(b, lengths_on_host, **kwargs) for b in batches]
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    for i, batch in enumerate(batches):
        got = _call(batch, lengths_on_host, **kwargs)
        assert_same_outputs(want[i], got, (layout, method, with_draft, want_logprobs, lengths_on_host, i))
    (plan,) = kept_plans().values()
    assert isinstance(plan, call_plan.ReplayPlan) and len(runs) == 3
    assert recorded == [max(lengths) + 1] and list(plan.replays) == recorded, "calls 3 and 4 did not replay"


def test_a_replay_plan_records_each_checked_width(kernel_setting, replays):
    """Same shapes, other draft lengths (so another output width and decide geometry), alternating:
    the plan records each width once (calls 2 and 3) and replays the first again (call 4)."""
    runs, recorded = replays
    shapes = ([20, 0, 0, 0, 0], [4, 4, 4, 4, 4])
    batches = [make_batch(4500 + i, lengths=shapes[i % 2], vocab=24) for i in range(4)]
    kernel_setting(call_plan, "ENABLED", False)
    want = [kernels.rejection_sample(*b.args(), method="block") for b in batches]
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    for i, batch in enumerate(batches):
        assert_same_outputs(want[i], kernels.rejection_sample(*batch.args(), method="block"), i)
    assert len(runs) == 3 and recorded == [5, 21]


def test_a_replay_needs_distinct_tensors(kernel_setting, replays):
    """Seeds and positions given as one tensor: a slot could not tell them apart, so the width is not
    recorded and every run launches the full path's way; later calls with distinct tensors (whose
    seeds differ from their positions) still equal the full path."""
    runs, recorded = replays
    batches = [make_batch(4600 + i, lengths=[2] * 5, vocab=40) for i in range(4)]
    for b in batches[:2]:
        b.positions = b.seeds
    kernel_setting(call_plan, "ENABLED", False)
    want = [kernels.rejection_sample(*b.args()) for b in batches]
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    for i, batch in enumerate(batches):
        assert_same_outputs(want[i], kernels.rejection_sample(*batch.args()), i)
    (plan,) = kept_plans().values()
    assert len(runs) == 3 and recorded == [3, 3] and list(plan.replays) == [3]


def test_bad_values_after_a_replayed_layout(replays):
    """The replay plan checks values on every call, like the small-batch plan."""
    runs, _ = replays
    release_workspaces()
    good = make_batch(27, lengths=[2, 1, 0, 1, 2], vocab=16)
    for _ in range(3):
        kernels.rejection_sample(*good.args())
    _assert_value_errors(good, (("draft_token_ids", [0, 16, 3, 1, 1, 2]),
                                ("temperature", [1.0, float("nan"), 1.0, 1.0, 1.0]),
                                ("cu_num_draft_tokens", [0, 2, 1, 3, 4, 6])))
    assert len(runs) == 5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("vocab,dtype", [(32000, torch.bfloat16), (151936, torch.float32)])
@pytest.mark.parametrize("method,with_draft,lengths_on_host", [("token", True, False), ("block", True, True),
                                                               ("block", False, False)])
def test_gpu_replay_plans_launch_directly_and_match_the_full_path(vocab, dtype, method, with_draft,
                                                                  lengths_on_host, kernel_setting, replays):
    """On the GPU a replay plan's recorded launches call the compiled kernels directly (checked against
    Triton's specialisation under SPECFUZZ_FAST_LAUNCH_CHECK=1), and replayed calls with new values
    equal the full path bit for bit (dependent launches on where the device has them)."""
    runs, recorded = replays
    batches = [make_batch(4700 + i, lengths=[3, 0, 8, 5, 1, 8, 2, 4], vocab=vocab, dtype=dtype,
                          with_draft=with_draft, device="cuda") for i in range(6)]
    kernel_setting(call_plan, "ENABLED", False)
    want = [_call(b, lengths_on_host, method=method, want_logprobs=True) for b in batches]
    kernel_setting(call_plan, "ENABLED", True)
    release_workspaces()
    for i, batch in enumerate(batches):
        assert_same_outputs(want[i], _call(batch, lengths_on_host, method=method, want_logprobs=True), i)
    (plan,) = kept_plans().values()
    (steps,) = plan.replays.values()
    assert len(runs) == 5 and recorded == [9]
    # pass 1, decide, race; the row table unless the value summary wrote it; pass 2 and decide again
    launches = 3 + lengths_on_host + 2 * (method == "block" and with_draft)
    assert len(steps) == launches and all(bound.direct for bound, _, _ in steps)
