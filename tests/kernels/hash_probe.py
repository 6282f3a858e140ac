"""Triton function hashes of our launched kernels in a prewarm process and in a check worker.

    TRITON_INTERPRET=0 python -m tests.kernels.hash_probe

Prints one JSON object ``{"spawned": {kernel: hash}, "worker": {kernel: hash}, "conflicts": ...}``.
``spawned`` comes from a process of the prewarm's pool (``harness.compiles.prewarm._pool``:
``spawn``), which hashes the kernels in the prewarm's order (sorted by name); ``worker`` from a
process started the way ``check`` starts its worker (``harness.execution.supervisor``: the fork
server with its preload, without the parent's ``__main__``), which hashes them in the opposite
order. Hashing needs no GPU:
with ``TRITON_INTERPRET=0`` Triton builds ``JITFunction`` objects on a CPU machine too. Nothing here
imports ``kernels`` at module level, so each process imports it itself.
"""

from __future__ import annotations

import json
import sys


def hashes(reverse: bool) -> dict:
    """``JITFunction.cache_key`` of every launched kernel, computed in sorted (or reversed) order."""
    from kernels.function_hashes import launched_kernels

    kernels = launched_kernels()
    return {name: kernels[name].cache_key for name in sorted(kernels, reverse=reverse)}


def conflicting_globals() -> dict:
    """Constexpr globals of one name with different values in different modules. Triton orders a
    hash's globals by name, then by the address of the module's dict, which may differ between
    processes: only names whose values agree keep the hash independent of that."""
    from collections import defaultdict

    from kernels.function_hashes import jit_functions

    values = defaultdict(set)
    for fn in jit_functions().values():
        fn.cache_key  # noqa: B018  (collects used_global_vals)
        for (name, _), (value, _) in fn.used_global_vals.items():
            values[name].add(repr(value))
    return {name: sorted(v) for name, v in values.items() if len(v) > 1}


def worker_hashes(conn, reverse: bool) -> None:
    conn.send(hashes(reverse))
    conn.close()


def main() -> int:
    from harness.compiles.prewarm import OUR_KERNELS, _pool
    from harness.execution.supervisor import _start_without_main, fork_server
    from tests.kernels import hash_probe as probe  # by module name, not __main__, for the children

    with _pool(1) as pool:
        spawned = pool.submit(probe.hashes, False).result(timeout=300)
    context = fork_server(OUR_KERNELS)
    parent, child = context.Pipe()
    proc = context.Process(target=probe.worker_hashes, args=(child, True), name="specfuzz-worker")
    _start_without_main(proc)
    child.close()
    if not parent.poll(300):
        raise TimeoutError("the worker sent no hashes within 300 s")
    worker = parent.recv()
    proc.join(30)
    json.dump({"spawned": spawned, "worker": worker, "conflicts": conflicting_globals()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
