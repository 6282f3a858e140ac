"""The import layout of DESIGN.md, checked on the source: one-way imports, no cycles.

- ``kernels/`` never imports ``harness``; ``reference/`` imports neither torch, triton nor ``harness``;
- no import cycle between ``harness`` modules (deferred imports inside functions count too);
- no cycle between the groups of ``harness``: each subpackage is one group, each top-level module its
  own group (so ``properties`` may use ``execution`` but ``execution`` may not use ``properties``).
Each rule is shown failing on a synthetic graph or source.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(source: str) -> set[str]:
    """Every absolute module an import statement anywhere in ``source`` names (``from a import b`` gives
    ``a`` and ``a.b``: ``b`` may be a submodule)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def harness_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in (ROOT / "harness").rglob("*.py")}
    return {
        name: {m for m in imported_modules(path.read_text()) if m in paths and m != name}
        for name, path in paths.items()
    }


def group_of(module: str) -> str:
    """``harness.properties.base`` -> ``properties``; a top-level module is its own group."""
    return module.split(".")[1]


def group_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for module, deps in graph.items():
        # ``harness`` (the package itself) and ``harness.__main__`` stand apart from the layers
        if module.count(".") == 0 or module == "harness.__main__":
            continue
        mine = group_of(module)
        groups.setdefault(mine, set()).update(group_of(d) for d in deps if group_of(d) != mine)
    return groups


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def forbidden_imports(package: str, banned: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path.read_text()):
            if module.split(".")[0] in banned:
                bad.append(f"{path.relative_to(ROOT)} imports {module}")
    return sorted(set(bad))


def test_kernels_never_import_the_harness():
    assert forbidden_imports("kernels", ("harness",)) == []


def test_reference_imports_neither_torch_triton_nor_the_harness():
    assert forbidden_imports("reference", ("torch", "triton", "harness")) == []


def test_no_cycle_between_harness_modules():
    assert cycles(harness_graph()) == []


def test_no_cycle_between_harness_groups():
    groups = group_graph(harness_graph())
    assert {"generation", "execution", "properties", "judging", "runner"} <= set(groups)
    assert cycles(groups) == []


def test_the_checks_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "harness.runner" in imported_modules("def f():\n    from harness import runner\n")
    # a deferred import from execution back into properties would close a group cycle
    graph = harness_graph()
    graph["harness.execution.kernel_calls"] |= {"harness.properties.base"}
    assert ["execution", "properties"] in cycles(group_graph(graph))
