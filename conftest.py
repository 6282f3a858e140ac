"""pytest configuration shared by every suite.

- Selects compiled Triton or the CPU interpreter BEFORE triton is imported anywhere
  (``TRITON_INTERPRET=1`` when no CUDA device is present).
- Registers the Hypothesis profiles of ``harness.profiles`` and loads the active one: ``ci`` on every
  machine unless ``SPECFUZZ_PROFILE`` names another (set here, so subprocesses the tests start inherit
  it). The suite is a fast gate; the ``gpu`` profile is what ``python -m harness check`` runs on a GPU.
- ``--kernel SPEC`` (``package.module:attr``) names the kernel under test for the kernel-agnostic
  property tests, ``--device cpu|cuda`` the device its tensors live on; fixtures ``kernel_spec``,
  ``kernel_under_test``, ``test_device`` and ``run_context`` hand them to tests. The kernel's calls
  run in a supervised worker (harness/execution/supervisor.py: a crash or hang fails the one test with a
  ``crash`` / ``hang`` finding, and the session goes on); ``--in-process`` turns that off,
  ``--time-limit SECONDS`` sets the per-call limit.
- Under ``pytest -n N`` on a GPU machine, each xdist worker is pinned to one GPU
  (``CUDA_VISIBLE_DEVICES``), round robin over the GPUs already visible to the controller, and the
  controller first compiles, in parallel, every Triton specialisation that a check of the active
  profile with ``SPECFUZZ_SEED`` makes (``python -m harness.compiles.prewarm``: what the property tests
  draw), so that the workers load binaries instead of compiling the same ones at the same time.
  ``SPECFUZZ_PREWARM=0`` turns that off; nothing happens without a GPU or with another ``--kernel``.
  The workers get ``SPECFUZZ_PREWARM=0``, so that a ``check`` a test runs (in process or as a
  subprocess) does not start a prewarm pool of its own beside 15 other workers: the controller's
  prewarm has compiled the profile's keys, and anything else compiles on demand.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Every FastLaunch variant is checked against Triton's per-argument specialisation in tests
# (kernels/launch.py); read when kernels.launch is imported, hence before any kernels import below.
os.environ.setdefault("SPECFUZZ_FAST_LAUNCH_CHECK", "1")

import kernels._device  # noqa: E402,F401  (must precede every triton import)
from harness.profiles import active_profile_name, register_hypothesis_profiles

os.environ.setdefault("SPECFUZZ_PROFILE", "ci")
register_hypothesis_profiles()
settings.load_profile(active_profile_name())


def pytest_addoption(parser):
    group = parser.getgroup("specfuzz")
    group.addoption(
        "--kernel",
        default=None,
        metavar="SPEC",
        help="kernel under test as package.module:attr (default: our Triton kernels)",
    )
    group.addoption(
        "--device",
        default=None,
        choices=("cpu", "cuda"),
        help="device the kernel's tensors live on (default: cuda when present)",
    )
    group.addoption(
        "--in-process",
        action="store_true",
        help="call the kernel under test in the pytest process (no supervised worker)",
    )
    group.addoption(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a supervised kernel call running longer is a hang finding (default: the profile's)",
    )


def visible_gpus() -> list[str]:
    """GPU ids visible to this process: an existing CUDA_VISIBLE_DEVICES wins over counting."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """Controller side, before workers start: give worker i the GPU ``visible[i % n]``, then prewarm
    the Triton cache (module docstring)."""
    gpus = visible_gpus()
    if not gpus:
        return
    for index, spec in enumerate(specs):
        spec.env["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
        spec.env["SPECFUZZ_PREWARM"] = "0"  # the controller's prewarm below serves them (module docstring)
    prewarm_command = prewarm_argv(config, gpus)
    if prewarm_command:
        import subprocess
        import sys

        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus[0])
        subprocess.run([sys.executable, *prewarm_command], env=env, cwd=str(config.rootpath), check=False)


def prewarm_argv(config, gpus: list[str]) -> list[str] | None:
    """``-m harness.compiles.prewarm ...`` for the controller, or None: no GPU, ``SPECFUZZ_PREWARM=0``, or a
    kernel under test other than ours (the plan is of our kernels' launches)."""
    import torch

    from harness.compiles.prewarm import OUR_KERNELS

    kernel = (config.getoption("--kernel") if config is not None else None) or OUR_KERNELS
    if os.environ.get("SPECFUZZ_PREWARM", "1") == "0" or kernel != OUR_KERNELS:
        return None
    if not gpus or not torch.cuda.is_available():
        return None
    return ["-m", "harness.compiles.prewarm", "--profile", active_profile_name(), "--seed",
            os.environ.get("SPECFUZZ_SEED", "0"), "--corpus"]


@pytest.fixture(scope="session")
def kernel_spec(request) -> str:
    from harness.plugins import DEFAULT_KERNEL_SPEC

    return request.config.getoption("--kernel") or DEFAULT_KERNEL_SPEC


def _profile(config):
    from harness.execution.supervisor import profile_with_limits
    from harness.profiles import PROFILES

    return profile_with_limits(PROFILES[active_profile_name()], config.option)


@pytest.fixture(scope="session")
def kernel_under_test(kernel_spec, request):
    from harness.execution.supervisor import close, supervise
    from harness.plugins import PluginError, load_kernel

    try:
        kernel = load_kernel(kernel_spec)
    except PluginError as exc:
        pytest.fail(f"--kernel {kernel_spec}: {exc}", pytrace=False)
    in_process = request.config.getoption("--in-process")
    kernel = supervise(kernel, kernel_spec, _profile(request.config), in_process)
    yield kernel
    close(kernel)


@pytest.fixture(scope="session")
def test_device(request):
    import torch

    name = request.config.getoption("--device") or ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        pytest.fail("--device cuda but no CUDA device is available", pytrace=False)
    return torch.device(name)


@pytest.fixture
def run_context(test_device, kernel_spec, request):
    """A fresh RunContext on the active profile; ``SPECFUZZ_SEED`` sets the root seed (default 0)."""
    from harness.properties.base import RunContext

    seed = int(os.environ.get("SPECFUZZ_SEED", "0"))
    profile = _profile(request.config)
    return RunContext(profile=profile, device=test_device, seed=seed, kernel_spec=kernel_spec)
