"""Which Triton specialisations a run on an H200 would compile, worked out on a CPU machine.

A GPU run of our kernels compiles one binary per distinct specialisation key (harness/compiles/keys.py)
of its launches. The keys depend only on the host side of each call: shapes, dtypes, strides,
alignment and the launch plan the driver derives from them (kernels/tuning.py's block sizes, the
small-batch and pruning thresholds, programmatic dependent launches on sm_90). ``gpu_planning()``
makes this process plan calls as the compiled kernels on an H200 would, without running them:

- ``kernels.tuning``'s compiled-Triton constants (8192-wide pass-1 blocks, 4096-wide race blocks,
  pruning from 2^25 raced entries) and ``dependent_launch.enabled`` true (compute capability 9.0);
- every ``FastLaunch`` launch is recorded with its key and skipped; the value summary's words are
  computed on the host instead (``host_summary``: its verdict is what makes bad input raise, and
  the driver needs the checked draft lengths to choose the output width, hence ``ROWS``);
- the statistical layer sizes its batches as on CUDA, and its kernel calls only plan
  (``PlannedKernel.plan_only``): counts land in one cell and no rejection is confirmed, so each
  assertion makes exactly the calls of a passing run;
- properties that size fixed cases by device read ``RunContext.device_type``, set to ``cuda``.

``PlannedKernel`` answers like the oracle (``harness.adapters.reference_kernel``), which every
property accepts, after letting our driver plan the call (and raise on bad input as the real kernel
does). A property therefore draws the cases and makes the calls of a run in which our kernels pass
on the GPU: the same Hypothesis examples from the same seed. What it cannot see: cases drawn only
after a real failure (shrinking) and the Triton kernels a GPU-only test launches directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from dataclasses import dataclass

import torch

import kernels._device  # noqa: F401  (selects TRITON_INTERPRET before triton is imported)
from harness.compiles.keys import LaunchRecord, kernel_name, specialisation_key

GPU_DEVICE_TYPE = "cuda"
# kernels/tuning.py's values for compiled Triton (it picks the interpreter's when no GPU is present).
GPU_TUNING = {"BLOCK_V": 8192, "RACE_BLOCK_V": 4096, "RACE_PRUNE_MIN_ENTRIES": 1 << 25}
SUMMARY_KERNEL = "_summarise_values_kernel"  # its result decides what follows: computed on the host


@dataclass
class PlanLog:
    """The launches planned inside ``gpu_planning`` (same interface as ``LaunchLog``)."""

    records: list

    def mark(self) -> int:
        return len(self.records)

    def since(self, mark: int) -> list[LaunchRecord]:
        return self.records[mark:]


@contextlib.contextmanager
def _patched(target, name: str, value):
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


@contextlib.contextmanager
def gpu_planning(tuning_values: dict | None = None, dependent_launches: bool = True):
    """Inside the block, our kernels plan calls as on an H200 and launch nothing but the value
    summary (module docstring). Yields a ``PlanLog``. Geometry caches, workspaces and call plans are
    dropped on entry and exit, so nothing planned leaks into real calls. ``tuning_values`` and
    ``dependent_launches`` replace the H200's settings (tests plan with the interpreter's, to
    compare with real launches)."""
    from harness.judging import stats
    from harness.properties import statistical, statistical_sampling
    from kernels import dependent_launch, launch, tuning
    from kernels.chunking import release_workspaces

    log = PlanLog([])

    def planned_launch(self, grid, args, kwargs, variant=None):
        record = getattr(launch._recorder, "launches", None)
        if record is not None:  # call plans record a chunk's launches to replay them
            record.append((self, grid, args, kwargs, variant))
        log.records.append(LaunchRecord(kernel_name(self.fn), specialisation_key(self.fn, args, kwargs)))
        if getattr(self.fn, "__name__", "") == SUMMARY_KERNEL:
            host_summary(*args[:4], num_reqs=args[8], num_drafts=args[9], copy_cu=kwargs["COPY_CU"])
        return None

    def first_stage_only(run, n, seeds, alpha):
        return stats.Confirmed(run(seeds[0], n), None, False)

    cuda_sizes = {"cpu": statistical_sampling._BATCH_BYTES["cuda"]}
    cuda_caps = {"cpu": statistical_sampling._MAX_BATCH["cuda"]}
    with contextlib.ExitStack() as stack:
        for name, value in (GPU_TUNING if tuning_values is None else tuning_values).items():
            stack.enter_context(_patched(tuning, name, value))
        stack.enter_context(_patched(dependent_launch, "enabled", lambda device: dependent_launches))
        stack.enter_context(_patched(launch.FastLaunch, "launch", planned_launch))
        stack.enter_context(_patched(stats, "confirm_rejection", first_stage_only))
        stack.enter_context(_patched(statistical, "count_cells", planned_count_cells))
        stack.enter_context(_patched(statistical, "_first_token_batches",
                                     _repeating_batches(statistical._first_token_batches)))
        stack.enter_context(_patched(statistical_sampling, "_BATCH_BYTES",
                                     {**statistical_sampling._BATCH_BYTES, **cuda_sizes}))
        stack.enter_context(_patched(statistical_sampling, "_MAX_BATCH",
                                     {**statistical_sampling._MAX_BATCH, **cuda_caps}))
        tuning.geometry.cache_clear()
        release_workspaces()
        try:
            yield log
        finally:
            tuning.geometry.cache_clear()
            release_workspaces()


def host_summary(cu, draft_ids, temperature, out, *, num_reqs: int, num_drafts: int, copy_cu: bool) -> None:
    """The words ``kernels.validation._summarise_values_kernel`` stores into ``out`` (its docstring):
    ``[cu[0], cu[R], min and max of cu[r+1] - cu[r] (0 without requests), min and max draft id, count
    of temperatures not >= 0]``, then ``cu`` itself with ``copy_cu``. The row table it also writes is
    not needed: nothing planned reads it."""
    from kernels.validation import SUMMARY_SCALARS

    cu64 = cu[: num_reqs + 1].to(torch.int64)
    steps = cu64[1:] - cu64[:-1]
    ids = draft_ids[:num_drafts].to(torch.int64)
    none = 2**62
    words = [cu64[0], cu64[num_reqs], steps.min() if num_reqs else 0, steps.max() if num_reqs else 0,
             ids.min() if num_drafts else none, ids.max() if num_drafts else -none,
             (~(temperature[:num_reqs] >= 0)).sum()]
    out[:SUMMARY_SCALARS] = torch.tensor([int(w) for w in words], dtype=torch.int64)
    if copy_cu:
        out[SUMMARY_SCALARS : SUMMARY_SCALARS + num_reqs + 1] = cu64


def planned_count_cells(kernel, batches, cell_of, num_cells: int) -> torch.Tensor:
    """``statistical_sampling.count_cells`` for a planning run: every batch is planned, none is run,
    and the counts (one per request, all in cell 0) carry the sample size the assertion reports."""
    total = 0
    for batch, _ in batches:
        plan = getattr(kernel, "plan_only", None)
        plan(batch) if plan is not None else kernel.verify(batch)
        total += batch.num_reqs
    counts = torch.zeros(num_cells + 1, dtype=torch.int64)
    counts[0] = total
    return counts


def _repeating_batches(generator):
    """``generator(row, method, n, seed_root, device)`` yielding the same batch shapes without
    building every batch: one full batch is built and handed out again for each full batch, then
    the last, partial one (the first-token law's batches hold up to 2 GiB of logits each on CUDA).
    Shapes, dtypes and strides (all a key depends on) are those of the real sequence; only values
    and seeds repeat. tests/harness/test_planning.py checks the sequence of shapes."""
    from harness.properties.statistical_sampling import batch_size

    def repeating(row, method, n, seed_root, device):
        size = batch_size(device, 3, row.target.shape[1], n)
        full, rest = divmod(n, size)
        if full:
            batch = next(generator(row, method, size, seed_root, device))
            for _ in range(full):
                yield batch
        if rest:
            yield next(generator(row, method, rest, seed_root, device))

    return repeating


def batch_fingerprint(batch) -> bytes:
    """A digest of everything in ``batch`` the oracle's answer depends on (every tensor's dtype,
    shape and values, the method, logprobs; not where the tensors live or the chunk budget)."""
    digest = hashlib.blake2b(digest_size=20)
    for field in dataclasses.fields(batch):
        value = getattr(batch, field.name)
        if field.name == "max_chunk_bytes":
            continue
        if isinstance(value, torch.Tensor):
            digest.update(f"{field.name}:{value.dtype}:{tuple(value.shape)}".encode())
            if value.numel():
                digest.update(value.detach().cpu().flatten().clone().view(torch.uint8).numpy().tobytes())
        else:
            digest.update(f"{field.name}={value!r}".encode())
    return digest.digest()


class PlannedKernel:
    """Our Triton kernels as a kernel under test in a planning run: the same name, methods and
    capabilities; ``verify`` / ``random_draws`` let the driver plan the call (recorded launches, the
    real argument checks) and answer with the oracle's output and uniforms. The oracle's answers
    to the last ``REMEMBERED`` batches are kept by content: properties that call the kernel again
    on the same batch pay the float64 oracle once. ``constant_answers``: ``constant_answer`` instead
    of the oracle (``CaseProperty.plans_with_constant_answers``)."""

    REMEMBERED = 8

    def __init__(self, real=None, constant_answers: bool = False):
        from harness.adapters.reference_kernel import ReferenceKernel
        from harness.adapters.triton_kernels import kernel as triton_kernel

        self.real = real or triton_kernel
        self.oracle = ReferenceKernel()
        self.name = f"{self.real.name} (planned)"
        self.methods = self.real.methods
        self.capabilities = self.real.capabilities
        self.constant_answers = constant_answers
        self._answers: dict = {}

    def _oracle(self, what: str, batch):
        key = (what, batch_fingerprint(batch))
        if key not in self._answers:
            if len(self._answers) >= self.REMEMBERED:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = getattr(self.oracle, what)(batch)
        return _copied(self._answers[key])

    def plan_only(self, batch) -> None:
        self.real.verify(batch)

    def verify(self, batch):
        self.real.verify(batch)
        if self.constant_answers:
            return constant_answer(batch)
        return self._oracle("verify", batch)

    def random_draws(self, batch):
        self.real.random_draws(batch)
        return self._oracle("random_draws", batch)


def constant_answer(batch):
    """The same output for every request (token 0, nothing accepted, logprob 0): what ``verify``
    answers with ``constant_answers``, for a property that compares the kernel only with itself and
    draws no case from its outputs (``CaseProperty.plans_with_constant_answers``), so that its plan
    pays no float64 oracle (half of ``layout_reuse``'s planning)."""
    from harness.contract import VerifyOutput

    width = batch.max_draft_len + 1
    ids = torch.full((batch.num_reqs, width), -1, dtype=torch.int64, device=batch.device)
    ids[:, 0] = 0
    logprobs = (torch.zeros((batch.num_reqs, width), dtype=torch.float32, device=batch.device)
                if batch.want_logprobs else None)
    return VerifyOutput(output_token_ids=ids, num_emitted=torch.ones(batch.num_reqs, dtype=torch.int32,
                                                                     device=batch.device), logprobs=logprobs)


def _copied(answer):
    """A fresh copy of a remembered answer (a property may write into what it was given)."""
    if isinstance(answer, tuple):
        return tuple(t.clone() for t in answer)
    return dataclasses.replace(answer, **{f.name: getattr(answer, f.name).clone()
                                          for f in dataclasses.fields(answer)
                                          if isinstance(getattr(answer, f.name), torch.Tensor)})
