"""BUGS.md class 17 (vllm#48630 design): randomness keyed by the chunk a request lands in. It claims
chunking, packs requests greedily into chunks of at most ``max_chunk_bytes`` of float32 rows, and
mixes the chunk index into each request's generator seed, so results change with the chunk budget.
Unchunked runs are exactly correct. Expected catchers: ``chunk_invariance`` (chunked == unchunked),
``batch_invariance``."""

from dataclasses import replace

import torch

from harness.implementations.torch_eager import TorchEagerKernel


class RandomnessKeyedByChunk(TorchEagerKernel):
    name = "broken.randomness_keyed_by_chunk"
    capabilities = replace(TorchEagerKernel.capabilities, chunking=True)

    def uniforms(self, batch, k_max, vocab):
        if batch.max_chunk_bytes is None:
            return super().uniforms(batch, k_max, vocab)
        row_bytes = 4 * vocab
        chunk, used, chunks = 0, 0, []
        for k in batch.draft_lengths():
            need = (k + 1) * row_bytes
            if used and used + need > batch.max_chunk_bytes:
                chunk, used = chunk + 1, 0
            used += need
            chunks.append(chunk)
        keyed = replace(batch, seeds=batch.seeds.cpu() ^ (torch.tensor(chunks, dtype=torch.int64) << 40))
        return super().uniforms(keyed, k_max, vocab)


kernel = RandomnessKeyedByChunk()
