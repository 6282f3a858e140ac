"""Throughput of the statistical layer: verified requests per second, histogrammed on the device.

    python bench/stat_throughput.py [--kernel SPEC] [--device cuda] [--samples 16777216] [--vocab 8 256 1024]

Replicates one fixed-draft request (g = 3, draft logits, every row different) with fresh seeds in
device-sized batches, runs the kernel, maps outputs to (tau, Y) cells and accumulates
``torch.bincount`` on the device, exactly as ``conditional_law`` does. Prints requests/s per V.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import kernels._device  # noqa: E402,F401
from harness.plugins import load_kernel  # noqa: E402
from harness.properties.statistical import _conditional_cell  # noqa: E402
from harness.properties.statistical_cases import rows_differ_request  # noqa: E402
from harness.properties.statistical_sampling import count_cells, replicated_batches  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="harness.adapters.triton_kernels:kernel")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--samples", type=int, default=1 << 24)
    parser.add_argument("--vocab", type=int, nargs="*", default=[8, 256, 1024])
    parser.add_argument("--method", default="token")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    kernel = load_kernel(args.kernel)
    for vocab in args.vocab:
        request = rows_differ_request(np.random.default_rng(vocab), vocab=vocab, gamma=3)
        base = request.batch(args.method, device)
        cell_of = _conditional_cell(vocab, 3, base.draft_token_ids.view(1, 3))
        count_cells(kernel, replicated_batches(base, 1 << 12, 1), cell_of, 4 * vocab)  # warm-up / JIT
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        counts = count_cells(kernel, replicated_batches(base, args.samples, 2), cell_of, 4 * vocab)
        secs = time.perf_counter() - started
        assert int(counts.sum()) == args.samples and int(counts[-1]) == 0
        print(
            f"{kernel.name} {args.method} V={vocab:5d}: {args.samples} requests in {secs:.2f}s = "
            f"{args.samples / secs:.3g} requests/s (whole statistical pipeline)",
            flush=True,
        )
        batch, _ = next(replicated_batches(base, args.samples, 3))
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        kernel.verify(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - started
        print(
            f"    kernel.verify alone, one batch of {batch.num_reqs}: {batch.num_reqs / secs:.3g} requests/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
