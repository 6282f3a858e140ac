"""Bit-exact NumPy replica of Triton's Philox4x32-10 and of specfuzz's randomness layout.

Contract (docs/interfaces.md section 1): the random number of vocabulary index ``v`` is output word
``v & 3`` of ``triton.language.random.philox(seed, c0, c1, c2, c3)`` with 32-bit counters

    c0 = v >> 2 (v = 0 for the accept stream), c1/c2 = low/high 32 bits of the absolute
    position, c3 = stream id (ACCEPT = 0, SAMPLE = 1),

keyed by the request's int64 seed reinterpreted as uint64 (``k0`` = low word, ``k1`` = high word).
Words map to float32 uniforms strictly inside (0, 1) by :func:`uniform_from_bits`.

Everything here is vectorised and broadcasts like NumPy; integer inputs of any signedness are
reinterpreted modulo 2**64 (seeds, positions) or 2**32 (counters), exactly as Triton's bitcasts do.
"""

from __future__ import annotations

import numpy as np

ACCEPT_STREAM = 0
SAMPLE_STREAM = 1

_KEY_A = np.uint64(0x9E3779B9)
_KEY_B = np.uint64(0xBB67AE85)
_ROUND_A = np.uint64(0xD2511F53)
_ROUND_B = np.uint64(0xCD9E8D57)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)

# Largest float32 strictly below 1 (0x1.fffffep-1).
FLOAT32_BELOW_ONE = np.float32(np.nextafter(np.float32(1.0), np.float32(0.0)))
_TWO_POW_MINUS_32 = np.float32(2.0**-32)


def as_uint64(values) -> np.ndarray:
    """Reinterpret integers (signed, unsigned, Python ints, negative ones) as uint64 two's complement."""
    arr = np.asarray(values)
    if arr.dtype == object:  # Python ints beyond int64: reduce modulo 2**64 first
        arr = np.array([int(v) % (1 << 64) for v in arr.ravel()], dtype=np.uint64).reshape(arr.shape)
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    if arr.dtype.kind in "ib":
        return arr.astype(np.int64).view(np.uint64)
    raise TypeError(f"expected integers, got dtype {arr.dtype}")


_BLOCK = 16384  # elements per pass: keeps the working set in cache (about 7x faster than one pass)


def _philox_block(x0, x1, x2, x3, k0, k1, n_rounds: int) -> tuple[np.ndarray, ...]:
    """Philox rounds on uint64 arrays holding 32-bit words (32 x 32 -> 64-bit products, no casts)."""
    for _ in range(n_rounds):
        prod_b = x2 * _ROUND_B
        prod_a = x0 * _ROUND_A
        x0 = (prod_b >> _SHIFT32) ^ x1 ^ k0
        x2 = (prod_a >> _SHIFT32) ^ x3 ^ k1
        x1 = prod_b & _LOW32
        x3 = prod_a & _LOW32
        k0 = (k0 + _KEY_A) & _LOW32
        k1 = (k1 + _KEY_B) & _LOW32
    return x0, x1, x2, x3


def philox4x32(seed, c0, c1, c2, c3, n_rounds: int = 10) -> tuple[np.ndarray, ...]:
    """``triton.language.random.philox`` with 32-bit counters: four uint32 arrays (broadcast shape)."""
    key = as_uint64(seed)
    inputs = np.broadcast_arrays(
        as_uint64(c0) & _LOW32,
        as_uint64(c1) & _LOW32,
        as_uint64(c2) & _LOW32,
        as_uint64(c3) & _LOW32,
        key & _LOW32,
        key >> _SHIFT32,
    )
    shape = inputs[0].shape
    if len(shape) == 0:
        return tuple(w.astype(np.uint32) for w in _philox_block(*inputs, n_rounds))
    outputs = [np.empty(shape, dtype=np.uint32) for _ in range(4)]
    row_size = int(np.prod(shape[1:], dtype=np.int64))
    rows_per_block = max(1, _BLOCK // max(row_size, 1))
    for start in range(0, shape[0], rows_per_block):
        block = slice(start, start + rows_per_block)
        words = _philox_block(*(a[block] for a in inputs), n_rounds)  # broadcast views: no full copies
        for out, word in zip(outputs, words, strict=True):
            out[block] = word
    return tuple(outputs)


def uniform_from_bits(bits) -> np.ndarray:
    """float32 uniform strictly inside (0, 1): ``min((float32(bits) + 0.5) * 2**-32, 0x1.fffffep-1)``.

    Every step is float32 with round-to-nearest-even, as in the kernels.
    """
    as_float = np.asarray(bits, dtype=np.uint32).astype(np.float32)
    u = (as_float + np.float32(0.5)) * _TWO_POW_MINUS_32
    return np.minimum(u, FLOAT32_BELOW_ONE)


def exponential_from_uniform(u) -> np.ndarray:
    """``E = -log1p(-u)`` in float64 (the reference's value of the kernels' exponential variate)."""
    return -np.log1p(-np.asarray(u, dtype=np.float64))


def log2_exponential_float32(u) -> np.ndarray:
    """The kernels' float32 evaluation of ``log2(-log1p(-u))`` (interfaces.md section 1), with exact
    float32 ``log2`` (compiled kernels use a hardware approximation within ~2^-22 of it)."""
    u = np.asarray(u, dtype=np.float32)
    f = np.float32
    poly = f(0.49999621510505676) + u * (f(0.33362314105033875) + u * (f(0.24319741129875183)
                                                                     + u * f(0.2610885500907898)))
    series = u + u * (u * poly)
    direct = f(-0.6931471805599453) * np.log2(f(1.0) - u)
    return np.log2(np.where(u < f(0.125), series, direct)).astype(np.float32)


def random_uniforms(seeds, positions, stream: int, vocab_index=0) -> np.ndarray:
    """Uniforms for (seed, absolute position, stream, vocabulary index), broadcast together:
    word ``v & 3`` of the Philox block at counter ``(v >> 2, pos lo, pos hi, stream)``."""
    pos = as_uint64(positions)
    vocab = as_uint64(vocab_index) & _LOW32
    words = philox4x32(seeds, vocab >> np.uint64(2), pos & _LOW32, pos >> _SHIFT32, stream)
    bits = np.choose((vocab & np.uint64(3)).astype(np.intp), words)
    return uniform_from_bits(bits)


def _rows_of_requests(cu_num_draft_tokens, extra_rows_per_request: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of every request: its request index and its 0-based offset within the request."""
    cu = np.asarray(cu_num_draft_tokens, dtype=np.int64)
    lengths = np.diff(cu) + extra_rows_per_request
    request = np.repeat(np.arange(lengths.size), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if lengths.size else np.zeros(0, np.int64)
    offset = np.arange(request.size, dtype=np.int64) - starts[request]
    return request, offset


def _row_positions(positions, request: np.ndarray, offset: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return as_uint64(positions)[request] + offset.astype(np.uint64)  # wraps like int64 adds


def accept_uniforms(seeds, positions, cu_num_draft_tokens) -> np.ndarray:
    """float32 ``[num_draft_total]``: slot j of request r uses (seeds[r], positions[r] + j, ACCEPT, v=0)."""
    request, offset = _rows_of_requests(cu_num_draft_tokens, 0)
    pos = _row_positions(positions, request, offset)
    return random_uniforms(as_uint64(seeds)[request], pos, ACCEPT_STREAM, 0)


def sampling_uniforms(seeds, positions, cu_num_draft_tokens, vocab_size: int) -> np.ndarray:
    """float32 ``[num_logits, V]``: row j of request r, column v: (seeds[r], positions[r] + j, SAMPLE, v)."""
    request, offset = _rows_of_requests(cu_num_draft_tokens, 1)
    pos = _row_positions(positions, request, offset)[:, None]
    quads = np.arange((vocab_size + 3) // 4, dtype=np.uint64)[None, :]
    keys = as_uint64(seeds)[request][:, None]
    words = philox4x32(keys, quads, pos & _LOW32, pos >> _SHIFT32, SAMPLE_STREAM)
    bits = np.stack(words, axis=-1).reshape(request.size, 4 * quads.size)[:, :vocab_size]
    return uniform_from_bits(bits)


def tl_randint(seed, offset) -> np.ndarray:
    """Replica of ``tl.randint(seed, offset)`` (uint32 words) for int32/int64 offsets."""
    off = as_uint64(offset)
    bits, _, _, _ = philox4x32(seed, off & _LOW32, off >> _SHIFT32, 0, 0)
    return bits


def tl_rand(seed, offset) -> np.ndarray:
    """Replica of ``tl.rand(seed, offset)``: Triton's own mapping, which can return exactly 0.0."""
    signed = tl_randint(seed, offset).view(np.int32)
    folded = np.where(signed < 0, ~signed, signed)
    return folded.astype(np.float32) * np.float32(4.6566127342e-10)
