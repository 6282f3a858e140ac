"""Load a kernel under test named as ``package.module:attr`` (an object or a zero-argument factory).

``attr`` may be dotted (``module:Class.instance``). A class or function found there is called with no
arguments; anything else is used as is. The result must meet the ``KernelUnderTest`` protocol; every
problem raises ``PluginError`` whose message says what was wrong and what was expected.
"""

from __future__ import annotations

import importlib
import inspect

from harness.contract import METHODS

DEFAULT_KERNEL_SPEC = "harness.adapters.triton_kernels:kernel"
REFERENCE_KERNEL_SPEC = "harness.adapters.reference_kernel:kernel"


class PluginError(Exception):
    """A kernel spec that cannot be turned into a kernel under test."""


def load_object(spec: str) -> object:
    """Import ``package.module`` and walk the dotted ``attr`` of ``package.module:attr``."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise PluginError(f"kernel spec {spec!r} must look like 'package.module:attr'")
    module_name, attr_path = spec.split(":")
    if not module_name or not attr_path:
        raise PluginError(f"kernel spec {spec!r} must look like 'package.module:attr'")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"cannot import module {module_name!r} of kernel spec {spec!r}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(
                f"{module_name!r} has no attribute {attr_path!r} (kernel spec {spec!r})"
            ) from None
    return obj


def _instantiate(obj: object, spec: str) -> object:
    if inspect.isclass(obj) or inspect.isfunction(obj):
        try:
            return obj()
        except TypeError as exc:
            raise PluginError(
                f"{spec!r} names a factory that cannot be called with no arguments: {exc}"
            ) from exc
    return obj


def protocol_problems(kernel: object) -> list[str]:
    """Ways in which ``kernel`` fails the KernelUnderTest protocol (empty when it conforms)."""
    problems = []
    if not isinstance(getattr(kernel, "name", None), str):
        problems.append("'name' must be a str")
    methods = getattr(kernel, "methods", None)
    if not isinstance(methods, (frozenset, set)) or not methods or not set(methods) <= set(METHODS):
        problems.append(f"'methods' must be a non-empty (frozen)set drawn from {METHODS}, got {methods!r}")
    if not callable(getattr(kernel, "verify", None)):
        problems.append("'verify(batch)' must be callable")
    draws = getattr(kernel, "random_draws", None)
    if draws is not None and not callable(draws):
        problems.append("'random_draws' must be callable when present")
    return problems


def load_kernel(spec: str) -> object:
    """The kernel under test named by ``spec``; raises ``PluginError`` with a clear message."""
    kernel = _instantiate(load_object(spec), spec)
    problems = protocol_problems(kernel)
    if problems:
        raise PluginError(f"{spec!r} is not a kernel under test: " + "; ".join(problems))
    return kernel
