"""Randomness of our kernels (docs/interfaces.md section 1) and the ``random_draws`` op.

The uniform of vocabulary index ``v`` is output word ``v & 3`` of ``triton.language.random.philox``
keyed by the request's seed, with counters ``(c0, c1, c2, c3) = (v >> 2, pos & 0xFFFFFFFF, pos >> 32,
stream)``: one Philox call serves four consecutive vocabulary entries (the sampling race is
ALU-bound, so this cuts its cost about fourfold). It depends on nothing else (no batch index, chunk,
program id or block size), which makes results batch- and chunk-invariant and lets
``reference/rng.py`` replay them bit for bit.
"""

from __future__ import annotations

from kernels._device import COMPILED  # (selects the interpreter before triton is imported)
import torch
import triton
import triton.language as tl

from kernels.fastmath import LN2, fast_log2
from kernels.launch import launch_jit

ACCEPT_STREAM = tl.constexpr(0)
SAMPLE_STREAM = tl.constexpr(1)
DRAWS_BLOCK = 1024
SERIES_BELOW = tl.constexpr(0.125)
# -log1p(-u) = u + u^2 (P1 + u (P2 + u (P3 + u P4))) on (0, 1/8]: a minimax fit in relative error
# (1.5e-8; the seven-term Taylor series it replaced: 6.8e-8)
E_P1 = tl.constexpr(0.49999621510505676)
E_P2 = tl.constexpr(0.33362314105033875)
E_P3 = tl.constexpr(0.24319741129875183)
E_P4 = tl.constexpr(0.2610885500907898)


@triton.jit
def uniform_from_bits(bits):
    """uint32 -> float32 strictly inside (0, 1): min((float32(bits) + 0.5) * 2^-32, 0x1.fffffep-1).

    Evaluated as ``float32(bits) * 2^-32 + 2^-33``, one fused multiply-add: scaling by a power of two
    is exact (no result is subnormal), so its one rounding is that of ``float32(bits) + 0.5``, fused
    or not (all 2^32 inputs checked)."""
    u = bits.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10
    return tl.minimum(u, 0.99999994039535522)


@triton.jit
def log2_exponential_from_uniform(u):
    """``log2 E`` with ``E = -log1p(-u)`` (interfaces.md section 1), two fast log2 per value.

    Below ``u = 1/8`` ``E = u + u^2 Q(u)`` with a cubic ``Q`` (minimax, relative error 1.5e-8): small
    ``E``, the race winners' tail, keeps full float32 resolution (BUGS.md class 15). Above it
    ``E = -ln(1 - u)``; ``1 - u`` is then within 2^-25 of exact, i.e. ``E`` within 5e-7 relative.
    """
    series = u + u * (u * (E_P1 + u * (E_P2 + u * (E_P3 + u * E_P4))))
    direct = -LN2 * fast_log2(1.0 - u)
    return fast_log2(tl.where(u < SERIES_BELOW, series, direct))


@triton.jit
def _mul_wide(a, m: tl.constexpr):
    """``(a * m) mod 2^32`` and ``(a * m) >> 32`` for uint32 ``a``: compiled, one ``mul.wide.u32``
    (sm_90: one ``IMAD.WIDE.U32``, where ``*`` and ``umulhi`` are an ``IMAD`` and an ``IMAD.HI``)."""
    if COMPILED:
        return tl.inline_asm_elementwise("{ .reg .u64 t; mul.wide.u32 t, $2, $3; mov.b64 {$0, $1}, t; }",
                                         "=r,=r,r,r", [a, tl.full(a.shape, m, tl.uint32)],
                                         dtype=(tl.uint32, tl.uint32), is_pure=True, pack=1)
    else:
        return a * m, tl.math.umulhi(a, m)


@triton.jit
def philox_words(seed, quad, position, stream: tl.constexpr):
    """The four Philox words of counter ``(quad, pos lo, pos hi, stream)``; shape of ``quad``.

    ``triton.language.random.philox(seed, ...)`` with its default 10 rounds, written out so that each
    round's two products are one wide multiply each (about 5 SASS instructions per vocabulary entry
    fewer in the race); ``tests/reference/test_rng.py`` pins it to Triton's and to the reference.
    """
    c0 = quad.to(tl.uint32)
    pos = position.to(tl.uint64, bitcast=True)
    zero = c0 * 0
    c1 = zero + (pos & 0xFFFFFFFF).to(tl.uint32)
    c2 = zero + (pos >> 32).to(tl.uint32)
    c3 = zero + stream
    key = seed.to(tl.uint64, bitcast=True)
    k0 = (key & 0xFFFFFFFF).to(tl.uint32)
    k1 = (key >> 32).to(tl.uint32)
    for _ in tl.static_range(10):
        lo0, hi0 = _mul_wide(c0, 0xD2511F53)
        lo2, hi2 = _mul_wide(c2, 0xCD9E8D57)
        c0, c1, c2, c3 = hi2 ^ c1 ^ k0, lo2, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def philox_uniform(seed, vocab_index, position, stream: tl.constexpr):
    """Uniform for (seed, absolute position, stream, vocab index 0) in the shape of ``vocab_index``,
    which must be all zeros (the accept stream: one value per draft slot, word 0 of quad 0).

    ``seed`` and ``position`` are int64 scalars or blocks (reinterpreted as uint64).
    """
    bits, _, _, _ = philox_words(seed, vocab_index, position, stream)
    return uniform_from_bits(bits)


@triton.jit
def sampling_uniforms_block(seed, first_col, position, stream: tl.constexpr, BLOCK: tl.constexpr):
    """Uniforms of vocabulary indices ``first_col + [0, BLOCK)`` in order (``stream``: SAMPLE_STREAM).

    ``first_col`` and ``BLOCK`` must be multiples of 4: BLOCK/4 Philox calls, whose words 0..3 are
    interleaved so that index ``v`` gets word ``v & 3`` of quad ``v >> 2``.
    """
    quads = first_col // 4 + tl.arange(0, BLOCK // 4)
    w0, w1, w2, w3 = philox_words(seed, quads, position, stream)
    bits = tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), (BLOCK,))
    return uniform_from_bits(bits)


@triton.jit
def _request_of_row(cu_ptr, num_reqs, row, extra_rows_per_request):
    """Largest request r with ``cu[r] - cu[0] + r * extra <= row`` (binary search over ``cu``).

    Target rows use ``extra = 1`` (request r owns k_r + 1 rows), draft rows ``extra = 0``.
    """
    cu0 = tl.load(cu_ptr)
    lo = row * 0
    hi = lo + num_reqs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        start = tl.load(cu_ptr + mid) - cu0 + mid * extra_rows_per_request
        lo = tl.where(start <= row, mid, lo)
        hi = tl.where(start <= row, hi, mid)
    return lo


@launch_jit(counts=("num_reqs",), small_pointers=("cu_ptr", "seeds_ptr", "positions_ptr"))
def _sampling_draws_kernel(out_ptr, cu_ptr, seeds_ptr, positions_ptr, num_reqs, vocab_size,
                           BLOCK: tl.constexpr):
    row = tl.program_id(0)
    req = _request_of_row(cu_ptr, num_reqs, row, 1)
    first_row = tl.load(cu_ptr + req) - tl.load(cu_ptr) + req
    seed = tl.load(seeds_ptr + req)
    position = tl.load(positions_ptr + req) + (row - first_row)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    u = sampling_uniforms_block(seed, tl.program_id(1) * BLOCK, position, SAMPLE_STREAM, BLOCK)
    tl.store(out_ptr + row.to(tl.int64) * vocab_size + cols, u, mask=cols < vocab_size)


@launch_jit(counts=("num_reqs",),
            small_pointers=("out_ptr", "cu_ptr", "seeds_ptr", "positions_ptr"))
def _accept_draws_kernel(out_ptr, cu_ptr, seeds_ptr, positions_ptr, num_reqs):
    slot = tl.program_id(0)
    req = _request_of_row(cu_ptr, num_reqs, slot, 0)
    seed = tl.load(seeds_ptr + req)
    position = tl.load(positions_ptr + req) + (slot - (tl.load(cu_ptr + req) - tl.load(cu_ptr)))
    u = philox_uniform(seed, tl.zeros((1,), tl.int32), position, ACCEPT_STREAM)
    tl.store(out_ptr + slot + tl.arange(0, 1), u)


def random_draws(target_logits, draft_logits, draft_token_ids, cu_num_draft_tokens, temperature, seeds,
                 positions, **_ignored):
    """The exact uniforms ``rejection_sample`` uses for this batch (interfaces.md section 1).

    Returns ``(accept_uniforms [num_draft_total], sampling_uniforms [num_logits, V])``, float32, on the
    logits' device. Takes the same batch arguments as ``rejection_sample``; only the shapes, ``cu``,
    ``seeds`` and ``positions`` matter (randomness never depends on logits or temperature).
    """
    num_logits, vocab_size = target_logits.shape
    num_reqs = cu_num_draft_tokens.numel() - 1
    num_drafts = draft_token_ids.numel()
    device = target_logits.device
    accept = torch.empty(num_drafts, dtype=torch.float32, device=device)
    sampling = torch.empty((num_logits, vocab_size), dtype=torch.float32, device=device)
    if num_reqs <= 0:
        return accept, sampling
    if num_drafts:
        _accept_draws_kernel[(num_drafts,)](accept, cu_num_draft_tokens, seeds, positions, num_reqs)
    if num_logits and vocab_size:
        grid = (num_logits, triton.cdiv(vocab_size, DRAWS_BLOCK))
        _sampling_draws_kernel[grid](sampling, cu_num_draft_tokens, seeds, positions, num_reqs, vocab_size,
                                     BLOCK=DRAWS_BLOCK)
    return accept, sampling
