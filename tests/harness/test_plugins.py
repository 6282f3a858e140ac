"""Loading kernels named as package.module:attr, and the errors for every way that can go wrong."""

from __future__ import annotations

import pytest

from harness.plugins import PluginError, load_kernel, load_object, protocol_problems


class Factory:
    name = "from-factory"
    methods = frozenset({"token"})

    def verify(self, batch):
        raise NotImplementedError


def make_kernel():
    return Factory()


def needs_argument(x):
    return Factory()


not_a_kernel = object()
kernel_object = Factory()
namespace = type("Namespace", (), {"inner": Factory()})


def test_loads_an_object_a_class_a_function_and_a_dotted_path():
    here = __name__
    assert load_kernel(f"{here}:kernel_object") is kernel_object
    assert load_kernel(f"{here}:Factory").name == "from-factory"
    assert load_kernel(f"{here}:make_kernel").name == "from-factory"
    assert load_kernel(f"{here}:namespace.inner").name == "from-factory"


def test_loads_the_shipped_adapters():
    assert load_kernel("harness.adapters.reference_kernel:kernel").name == "reference"
    triton = load_kernel("harness.adapters.triton_kernels:kernel")
    assert triton.methods == frozenset({"token", "block"}) and callable(triton.random_draws)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("no_colon", "must look like"),
        ("a:b:c", "must look like"),
        (":attr", "must look like"),
        ("surely_missing_module_xyz:k", "cannot import module"),
        (f"{__name__}:missing", "has no attribute"),
        (f"{__name__}:needs_argument", "no arguments"),
        (f"{__name__}:not_a_kernel", "not a kernel under test"),
    ],
)
def test_clear_errors(spec, words):
    with pytest.raises(PluginError, match=words):
        load_kernel(spec)


def test_protocol_problems_name_each_missing_part():
    problems = protocol_problems(object())
    assert len(problems) == 3
    bad_methods = type(
        "K", (), {"name": "k", "methods": frozenset({"tree"}), "verify": lambda self, b: None}
    )()
    assert any("methods" in p for p in protocol_problems(bad_methods))


def test_load_object_returns_factories_uncalled():
    assert load_object(f"{__name__}:make_kernel") is make_kernel
