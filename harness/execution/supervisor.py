"""Kernel calls in a supervised worker process: a crash, a hard exit, a CUDA fault or a hang costs one case.

``supervise(kernel, spec, profile)`` returns a ``SupervisedKernel``: the same kernel as seen by the
properties (its ``name``, ``methods``, ``capabilities`` and every other attribute come from the copy
loaded here, which is never called), except that ``verify``, ``random_draws`` and ``verify_into`` run
in a worker process (harness/execution/worker.py). What the harness sees of a call:

- the result, and every write the call made into its arguments (harness/execution/transport.py moves
  storages whole, so guard bands, aliasing and input modification are seen as in one process);
- the kernel's exception, re-raised here (``ValueError`` stays ``ValueError``, with the worker's
  traceback as ``remote_traceback``);
- ``KernelFault("crash")`` when the worker died (a signal: segfault, abort; or a hard exit such as
  ``os._exit(3)`` or ``sys.exit``) or left its CUDA device unusable; ``KernelFault("hang")`` when the
  call outlived its time limit (the worker is sent SIGUSR1, which makes it dump every thread's stack
  into its log, then killed with its process group). Evidence: exit status, signal, seconds, the
  limit and the tail of the worker's stderr written during the call.

Decisions (bench/supervision_overhead.py; figures from a 2-core CPU machine at load 8-9, 2026-12-04):
- ONE long-lived worker, reused by every call, not a process per case. Workers are forked by
  ``multiprocessing``'s fork server, which has imported torch and the harness (and, without CUDA,
  the kernel's module) once: a fresh worker is ready in ~40 ms instead of the 2-5 s of a new
  interpreter, which is what makes shrinking a crash affordable (each crashing try needs a fresh
  worker). The server starts once per harness process (3-5 s). A fault retires the worker; from the
  first fault on a spare is kept warm. The kernel's compiles are paid once per worker.
- Only the kernel's calls cross; strategies, the oracle and every check stay in the harness, so a
  fault is pinned to the exact batch of the exact call and no property needs to know about workers.
- Tensors cross as bytes through pipes (CUDA tensors through host memory): costs a copy of each
  argument storage per call, and of each result and modified storage back. Measured (CPU time of
  harness + worker, oracle kernel): +1.0 ms per call at 40 KB of arguments, +2.8 ms at 1.1 MB, +14.5
  ms at 8.8 MB; ``structural`` on ci-profile cases (3 calls each) +3.1 ms per case (5.9 -> 9.0 ms).
- Time limits from the profile: ``call_time_limit_s`` per call (``--time-limit`` overrides it);
  while the worker compiles (Triton's cache-miss hook fired and its post-compile hook has not: a GPU,
  never the CPU interpreter) the larger ``compile_time_limit_s`` from the compile's start, and after
  each compile the call's clock restarts. A call that compiles is thus never a ``hang`` for its
  compiles, and a call that hangs pays ``call_time_limit_s``, whether or not it is the run's first
  (before issue 44 the run's first call got 600 s, compiling or not). A hang's evidence counts the
  compiles of the call.
- A hang is paid in full once per run: after the run's first hang, a call that does not compile gets
  ``min(call_time_limit_s, max(HANG_RETRY_FLOOR_S, HANG_RETRY_FACTOR x the slowest call that
  returned))`` (a fast kernel that hangs on large batches: 10 s per further hang instead of 120 s;
  an interpreter-speed kernel keeps its 120 s). A legitimate call that slow after a hang would be
  misreported as a hang; the evidence states the limit and why.
- ``in_process=True`` (``--in-process`` on the command line) returns the kernel itself: no worker, a
  crash ends the run. That is the mode for debuggers (gdb, compute-sanitizer) and for the foreground
  reproduction of a ``crash`` / ``hang`` finding.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from multiprocessing import spawn

from harness.execution.kernel_calls import KernelFault, WorkerError
from harness.execution.transport import Packer, as_storage, unpack, write_back
from harness.execution.worker import CALLS, COMPILED, COMPILING
from harness.execution.worker import main as worker_main

STDERR_TAIL_CHARS = 3000
HANG_RETRY_FLOOR_S = 10.0  # the shortest limit after a hang
HANG_RETRY_FACTOR = 10.0  # after a hang, a call may take this many times the slowest call that returned
DUMP_GRACE_S = 0.5  # after SIGUSR1, how long a hung worker gets to write its stacks


class RemoteKernelError(RuntimeError):
    """The kernel raised an exception in the worker that could not be sent back as itself."""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


PRELOAD = [
    "harness.execution.worker",
    "harness.execution.transport",
    "harness.plugins",
    "harness.execution.guard_bands",
]


def fork_server(spec: str):
    """The ``multiprocessing`` context whose fork server starts workers. Before it first starts, it is
    told to preload torch and the harness (never CUDA, so each forked worker creates its own
    context) and, on a machine without CUDA, the kernel's module too (the Triton interpreter's
    imports are then paid once, not per worker)."""
    import torch

    context = multiprocessing.get_context("forkserver")
    extra = [] if torch.cuda.is_available() else ["kernels._device", spec.split(":")[0]]
    context.set_forkserver_preload(PRELOAD + extra)  # no effect once the server runs
    return context


def _start_without_main(process) -> None:
    """``process.start()``, except that the child does not run the parent's ``__main__`` module again
    (``multiprocessing`` would, as ``__mp_main__``: seconds of imports per worker under pytest or a
    script). The worker needs nothing from it: its target and arguments live in harness/."""
    real = spawn.get_preparation_data

    def without_main(name):
        data = real(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    spawn.get_preparation_data = without_main
    try:
        process.start()
    finally:
        spawn.get_preparation_data = real


class Worker:
    """One worker process: its pipe, its log file, and what became of it."""

    def __init__(self, spec: str, log_dir: str):
        fd, self.log_path = tempfile.mkstemp(prefix="worker-", suffix=".log", dir=log_dir)
        os.close(fd)
        context = fork_server(spec)
        self.conn, child = context.Pipe()
        self.proc = context.Process(
            target=worker_main, args=(child, spec, self.log_path), name="specfuzz-worker"
        )
        _start_without_main(self.proc)
        child.close()
        self.send = self.conn.send
        self.ready = False
        self.preloaded = 0  # how many of the supervisor's preloads were sent to this worker

    def log_size(self) -> int:
        return os.path.getsize(self.log_path)

    def log_tail(self, since: int = 0) -> str:
        """The log from ``since``, at most its last ``STDERR_TAIL_CHARS``, without faulthandler's
        closing list of loaded extension modules: with scipy loaded it is over 3000 characters, and
        it pushed the stack dump (the evidence) out of the tail."""
        with open(self.log_path, "rb") as f:
            f.seek(max(since, self.log_size() - 8 * STDERR_TAIL_CHARS))
            text = f.read().decode("utf-8", "replace")
        kept = [line for line in text.splitlines(keepends=True) if not line.startswith("Extension modules: ")]
        return "".join(kept)[-STDERR_TAIL_CHARS:]

    def dump_stacks(self) -> None:
        """Ask a hung worker for every thread's stack (faulthandler, into the log); wait until the
        log has grown and stopped growing, at most ``DUMP_GRACE_S``."""
        size = self.log_size()
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline, last = time.monotonic() + DUMP_GRACE_S, size
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.log_size()
            if last > size and now == last:
                return
            last = now

    def receive(self, timeout: float):
        """The next message, ``None`` after ``timeout`` seconds; ``EOFError`` if the worker died."""
        if not self.conn.poll(timeout):
            return None
        return self.conn.recv()

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        try:
            reply = self.receive(timeout)
        except (EOFError, OSError):
            reply = ("broken", f"the worker died while starting ({self.status()})")
        if reply is None:
            reply = ("broken", f"the worker did not start within {timeout:.0f} s")
        if reply[0] != "ready":
            self.kill()
            raise WorkerError(f"{reply[1]}\n{self.log_tail()}")
        self.ready = True

    def status(self) -> str:
        self.proc.join(timeout=10)
        code = self.proc.exitcode
        if code is None:
            return "its pipe closed while it was still running"
        if code < 0:
            return f"killed by signal {-code} ({_signal_name(-code)})"
        return f"exit status {code}"

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        if self.alive():
            for kill in (os.killpg, os.kill):  # the group it leads, or itself before its setsid
                try:
                    kill(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        self.proc.join()
        self.conn.close()


class Supervisor:
    """Runs kernel calls in a worker, replaces it after a fault, and turns faults into ``KernelFault``."""

    def __init__(self, spec: str, call_limit_s: float, compile_limit_s: float):
        self.spec = spec
        self.call_limit_s = call_limit_s
        self.compile_limit_s = max(call_limit_s, compile_limit_s)
        self.calls = 0
        self.faults = 0
        self.hangs = 0
        self.slowest_ok_s = 0.0
        self.workers_started = 0
        self._log_dir = tempfile.mkdtemp(prefix="specfuzz-workers-")
        self._active: Worker | None = None
        self._spare: Worker | None = None
        self._preloads: list = []  # (loader, record), in the order given: every worker gets them all
        self._preloads_lock = threading.Lock()
        atexit.register(self.close)

    def preload(self, loader: str, records) -> None:
        """Have the worker call ``loader`` (``module:function``) on each record while it waits for
        calls (harness/execution/worker.py ``Preloader``): sent before the next call, and again to
        a worker that replaces a faulted one. Safe from any thread."""
        with self._preloads_lock:
            self._preloads.extend((loader, record) for record in records)

    def _send_preloads(self, worker: Worker) -> None:
        with self._preloads_lock:
            todo = self._preloads[worker.preloaded:]
            worker.preloaded = len(self._preloads)
        for loader in dict.fromkeys(loader for loader, _ in todo):
            worker.send(("preload", loader, [record for name, record in todo if name == loader]))

    def _start(self) -> Worker:
        self.workers_started += 1
        return Worker(self.spec, self._log_dir)

    def _worker(self) -> Worker:
        if self._active is not None and not self._active.alive():  # died between calls: not a case's fault
            self._active.kill()
            self._active = None
        if self._active is None:
            self._active, self._spare = (self._spare or self._start()), None
            self._active.wait_ready(self.compile_limit_s)
            if self.faults and self._spare is None:
                self._spare = self._start()
        return self._active

    def _retire(self, worker: Worker) -> None:
        worker.kill()
        os.unlink(worker.log_path)
        self._active = None
        self.faults += 1
        if self._spare is None:
            self._spare = self._start()

    def call(self, name: str, *args):
        """``kernel.<name>(*args)`` in the worker; see the module docstring for what comes back."""
        worker = self._worker()
        self._send_preloads(worker)
        self.calls += 1
        packer = Packer()
        tree = packer.pack(args)
        since, started = worker.log_size(), time.monotonic()
        call_limit = self.current_call_limit()
        limit, deadline, compiles = call_limit, started + call_limit, 0
        try:
            worker.send(("call", name, tree, packer.table()))
            while True:
                reply = worker.receive(max(0.0, deadline - time.monotonic()))
                if reply is None or reply[0] not in (COMPILING, COMPILED):
                    break
                if reply[0] == COMPILING:  # the worker compiles: the compile limit runs from now
                    compiles += 1
                    limit, deadline = self.compile_limit_s, time.monotonic() + self.compile_limit_s
                else:  # compiled: the call's own clock restarts
                    limit, deadline = call_limit, time.monotonic() + call_limit
        except (EOFError, OSError):
            reply = ("died",)
        except BaseException:  # e.g. SIGTERM's Interrupted: the call's reply must never meet the next call
            worker.kill()
            self._active = None
            raise
        if reply is None or reply[0] in ("died", "fault"):
            raise self._fault(worker, name, reply, limit, since, time.monotonic() - started, args, compiles)
        self.slowest_ok_s = max(self.slowest_ok_s, time.monotonic() - started)
        write_back(packer.storages, reply[1])
        if reply[0] == "raised":
            error = reply[2] or RemoteKernelError(reply[3])
            error.remote_traceback = reply[4]
            raise error
        storages = packer.storages + [as_storage(data, device) for device, data in reply[3]]
        return unpack(reply[2], storages)

    def current_call_limit(self) -> float:
        """``call_limit_s``, or after a hang of this run the shorter retry limit (module docstring)."""
        if not self.hangs:
            return self.call_limit_s
        return min(self.call_limit_s, max(HANG_RETRY_FLOOR_S, HANG_RETRY_FACTOR * self.slowest_ok_s))

    def _fault(self, worker, name, reply, limit, since, seconds, args, compiles=0) -> KernelFault:
        evidence = {"call": name, "seconds": round(seconds, 3), "time_limit_s": limit, "compiles": compiles}
        if reply is None:
            worker.dump_stacks()
            why = "the call's time limit"
            if self.hangs and limit < self.call_limit_s:
                why = (f"reduced after an earlier hang of this run: {HANG_RETRY_FACTOR:g}x the slowest "
                       f"call that returned, at least {HANG_RETRY_FLOOR_S:g} s")
            self.hangs += 1
            kind, message = "hang", f"{name} did not return within {limit:g} s ({why})"
        elif reply[0] == "fault":
            kind, message = "crash", f"{name} left the CUDA device unusable: {reply[1]}"
            evidence["cuda_error"] = reply[1]
        else:
            kind, message = "crash", f"{name} ended the worker process: {worker.status()}"
        worker.kill()
        code = worker.proc.exitcode
        if reply is not None and reply[0] == "died":  # not the worker's own exit after a CUDA fault
            evidence["exit_status"] = code
            if code < 0:
                evidence["signal"] = _signal_name(-code)
        evidence["stderr_tail"] = worker.log_tail(since)
        self._retire(worker)
        batch = args[0] if args else None
        return KernelFault(kind, name, message, evidence, batch)

    def worker_pid(self) -> int | None:
        """The process id of the worker that runs the next call (None before the first call)."""
        return self._active.proc.pid if self._active is not None else None

    def close(self) -> None:
        for w in (self._active, self._spare):
            if w is not None:
                w.kill()
        self._active = self._spare = None
        shutil.rmtree(self._log_dir, ignore_errors=True)


class SupervisedKernel:
    """The kernel under test with its calls (``verify``, ``random_draws``, ``verify_into``) supervised."""

    def __init__(self, kernel: object, supervisor: Supervisor):
        self._kernel = kernel
        self.supervisor = supervisor

    def __getattr__(self, name: str):
        value = getattr(self._kernel, name)
        if name in CALLS and callable(value):
            return functools.partial(self.supervisor.call, name)
        return value

    def close(self) -> None:
        self.supervisor.close()


def supervise(kernel: object, spec: str, profile, in_process: bool = False) -> object:
    """The kernel to hand to the properties: ``kernel`` itself in process, else a ``SupervisedKernel``
    whose worker loads ``spec`` (``package.module:attr``, as on the command line)."""
    if in_process:
        return kernel
    return SupervisedKernel(
        kernel, Supervisor(spec, profile.call_time_limit_s, profile.compile_time_limit_s)
    )


def close(kernel: object) -> None:
    """Stop the worker of a ``SupervisedKernel`` (nothing for an in-process kernel)."""
    if isinstance(kernel, SupervisedKernel):
        kernel.close()


def add_supervision_args(parser) -> None:
    """``--in-process`` and ``--time-limit``, the same on every command that calls a kernel."""
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="call the kernel in this process (no worker: a crash ends the run; for debuggers)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a supervised kernel call running longer is a hang finding (default: the profile's)",
    )


def profile_with_limits(profile, args):
    """``profile`` with ``--time-limit`` applied (the same profile when it was not given)."""
    if getattr(args, "time_limit", None) is None:
        return profile
    if args.time_limit <= 0:
        raise ValueError("--time-limit must be positive")
    return dataclasses.replace(profile, call_time_limit_s=args.time_limit)
