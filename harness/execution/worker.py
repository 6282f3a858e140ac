"""The worker process: loads the kernel under test once and runs its calls for the supervising harness.

Started by ``harness.execution.supervisor`` through ``multiprocessing``'s fork server: a process that has
imported torch and the harness (never CUDA) forks each worker, so a fresh worker after a crash
costs milliseconds, not an interpreter start. ``main(conn, spec, log_path)`` is the entry point; the
worker loads the kernel itself (``kernels._device`` first), so its CUDA context is its own.
Messages are pickled tuples over one ``multiprocessing`` pipe:

- harness -> worker: ``("call", name, tree, table)`` per call (``name`` is ``verify``,
  ``random_draws`` or ``verify_into``; ``tree`` and ``table`` are the arguments as packed by
  ``harness.execution.transport``); ``("preload", loader, records)``, no reply: a thread of the
  worker calls ``loader`` (``module:function``) on each record, between calls (``Preloader``).
- worker -> harness: ``("ready", kernel_name)`` or ``("broken", text)`` once loaded; per call
  ``("ok", changed, result_tree, result_table)`` or ``("raised", changed, error, text, trace)``, where
  ``changed`` maps argument storages the call modified to their new bytes; ``("fault", text)`` when
  the call left a CUDA device unusable (the worker then exits: its context is gone).

Contracts: the worker's stdout and stderr go to ``log_path`` (its tail becomes evidence); it leads a
process group of its own (a hang is killed with whatever it started); ``faulthandler`` dumps
every thread's stack on a fatal signal, and on SIGUSR1 (what the harness sends a call that outlived
its time limit, before killing it). Freed device memory is poisoned before every call
(``harness.execution.guard_bands.poison_allocator``), as ``structural`` does in one process. The worker exits
when the harness closes its pipe, and (on Linux) is killed when the fork server exits with the
harness, so a hung worker never outlives a killed harness.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import os
import pickle
import signal
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection

CALLS = ("verify", "random_draws", "verify_into")
PR_SET_PDEATHSIG = 1


def _picklable(error: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 -- the text and trace still travel
        return None


def _devices(storages) -> set:
    return {s.device for s in storages}


class Preloader:
    """Work a worker does while it waits for the harness: ``loader(record)`` for each record given,
    in order, in a thread of its own (the harness uses it to load Triton binaries its next calls
    will launch: harness/compiles/prewarm.py ``load_binary``). It never runs during a call: a call
    takes ``lock`` (``during_call``) and waits at most for the record being loaded; the thread yields
    to a waiting call before each record. A record whose loading took over ``SLOW_S`` (a compile,
    not a load: its binary was missing) stops the preloading, so a call waits for at most one such
    compile; a record that raises is skipped (the call that needs it pays for it as before)."""

    SLOW_S = 1.0

    def __init__(self):
        self.lock, self.call_waiting = threading.Lock(), threading.Event()
        self.queue: deque = deque()
        self.more = threading.Event()
        self.stopped = False
        self._thread = None

    def add(self, loader: str, records) -> None:
        module, _, name = loader.partition(":")
        try:
            load = getattr(importlib.import_module(module), name)
        except Exception as exc:  # noqa: BLE001 -- preloading only saves time; the calls still run
            print(f"specfuzz preload: no loader {loader}: {type(exc).__name__}: {exc}", flush=True)
            return
        self.queue.extend((load, r) for r in records)
        self.more.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="specfuzz-preload", daemon=True)
            self._thread.start()

    @contextlib.contextmanager
    def during_call(self):
        """Hold off the loading while a call runs (after the load in progress, if any)."""
        self.call_waiting.set()
        with self.lock:
            self.call_waiting.clear()
            yield

    def _run(self) -> None:
        while not self.stopped:
            if not self.queue:
                self.more.wait()
                self.more.clear()
                continue
            while self.call_waiting.is_set():
                time.sleep(0.001)
            with self.lock:
                if not self.queue:
                    continue
                load, record = self.queue.popleft()
                started = time.perf_counter()
                try:
                    load(record)
                except Exception as exc:  # noqa: BLE001 -- the call that needs it compiles it on demand
                    print(f"specfuzz preload: {record!r:.200}: {type(exc).__name__}: {exc}", flush=True)
                if time.perf_counter() - started > self.SLOW_S:
                    self.stopped = True
                    print(f"specfuzz preload: stopped, {record!r:.200} took "
                          f"{time.perf_counter() - started:.1f}s (compiled, not loaded)", flush=True)


def serve(conn: Connection, spec: str) -> None:
    """Load the kernel, then answer ``call`` messages until the harness closes the pipe."""
    try:
        import torch

        import kernels._device  # noqa: F401  (chooses compiled Triton or the interpreter first)
        from harness.execution import (
            kernel_calls,
            transport,  # noqa: F401  (a broken import is told as "broken")
        )
        from harness.execution.guard_bands import poison_allocator
        from harness.plugins import load_kernel

        kernel = load_kernel(spec)
        if torch.cuda.is_available():
            # The CUDA context (seconds on a loaded GPU machine) is made before "ready", under the
            # start-up limit, not inside the first call's time limit (a 1 s limit read it as a hang).
            torch.zeros(1, device="cuda")
    except BaseException as exc:  # noqa: BLE001 -- told to the harness, which reports it
        conn.send(("broken", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"))
        return
    conn.send(("ready", kernel.name))
    _report_compiles(conn)  # after "ready": only a call's compiles are reported
    preloader = Preloader()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "preload":
            preloader.add(message[1], message[2])
            continue
        with preloader.during_call():
            _serve_call(conn, kernel, message, torch, kernel_calls, poison_allocator)


def _serve_call(conn, kernel, message, torch, kernel_calls, poison_allocator) -> None:
    """One ``call`` message, answered on ``conn`` (module docstring)."""
    from harness.execution.transport import (
        Packer,
        as_storage,
        changed_storages,
        snapshot,
        storage_bytes,
        unpack,
    )

    _, name, tree, table = message
    storages = [as_storage(data, device) for device, data in table]
    before = snapshot(storages, table)
    args = unpack(tree, storages)
    devices = _devices(storages)
    for device in devices:
        poison_allocator(device)
    try:
        result = getattr(kernel, name)(*args)
        for device in devices:
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # surface asynchronous faults inside the call
        error = None
    except Exception as exc:  # noqa: BLE001 -- a kernel may raise anything
        if not all(kernel_calls.HEALTH_CHECK(d) for d in devices):
            conn.send(("fault", f"{type(exc).__name__}: {exc}"))
            os._exit(1)
        result, error = None, exc
    try:
        changed = {i: storage_bytes(storages[i]) for i in changed_storages(before, storages)}
        if error is not None:
            text = f"{type(error).__name__}: {error}"
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)[-6:])
            conn.send(("raised", changed, _picklable(error), text, trace))
            return
        packer = Packer(storages)
        packed = packer.pack(result)
        conn.send(("ok", changed, packed, packer.table()))
    except Exception as exc:  # noqa: BLE001 -- e.g. a device that fails only when read back
        conn.send(("fault", f"after the call: {type(exc).__name__}: {exc}"))
        os._exit(1)


COMPILING, COMPILED = "compiling", "compiled"


def _report_compiles(conn: Connection) -> None:
    """Tell the harness when a call starts and ends compiling a Triton kernel (Triton's cache-miss
    and post-compile hooks, triton >= 3.3; chained to hooks already set), so that a compile gets the
    compile time limit and a hang does not (harness/execution/supervisor.py). Under the CPU
    interpreter nothing compiles and nothing is sent."""
    try:
        from triton import knobs
    except ImportError:
        return
    runtime = knobs.runtime
    if not hasattr(runtime, "jit_cache_hook") or not hasattr(runtime, "jit_post_compile_hook"):
        return
    previous_miss, previous_done = runtime.jit_cache_hook, runtime.jit_post_compile_hook

    main = threading.main_thread()

    def chained(message, previous):
        def hook(**kwargs):
            if threading.current_thread() is main:  # the Preloader's loads are no call's
                conn.send((message,))
            return previous(**kwargs) if previous else None

        return hook

    runtime.jit_cache_hook = chained(COMPILING, previous_miss)
    runtime.jit_post_compile_hook = chained(COMPILED, previous_done)


def _die_with_parent() -> None:
    """Linux: be killed when the fork server goes, so that a hung worker never outlives a harness
    that was itself killed. The fork server exits once every holder of its "alive" pipe has closed
    it: the harness, and every forked child, which inherits a copy (so that it could fork through
    the server too). A worker forks nothing, so it closes its copy."""
    from multiprocessing import forkserver

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        server = forkserver._forkserver
        if server._forkserver_alive_fd is not None:
            os.close(server._forkserver_alive_fd)
            server._forkserver_alive_fd = None
    except (OSError, AttributeError):
        pass


def main(conn: Connection, spec: str, log_path: str) -> None:
    os.setsid()
    _die_with_parent()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    serve(conn, spec)
