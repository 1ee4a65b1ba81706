"""The floors of kgqa, checked by walking every import of every module (docs/architecture.md draws them).

Arrows point down only: the KG, LLM and text layers never import steps, methods, eval or the CLI; steps never import
methods; methods never import eval or the CLI; and no module reaches itself through a chain of imports. Imports inside
functions count (a lazy import is still an arrow); imports under ``if TYPE_CHECKING:`` do not (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "kgqa"

#: Which top-level parts of kgqa each part may import. A part not listed here may import any part listed above it.
FLOOR = {
    # the ground floor: shared types and settings, importing nothing of kgqa but each other
    "errors": 0, "config": 0, "normalize": 0, "localdb": 0, "provenance": 0, "registry": 0, "core": 0, "deadline": 0,
    "__init__": 0,
    "__main__": 8,
    "kg": 1, "llm": 1, "text": 1, "data": 1,
    "artifacts": 2,
    "datasets": 2,
    "steps": 3,
    "methods": 4,
    "testing": 5,
    "eval": 5,
    "service": 6,
    "cli": 7,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(path: Path, own: str | None = None) -> Iterator[tuple[str, int]]:
    """The kgqa modules ``path`` (the module ``own``) imports, with the line, leaving out type-checking-only imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _type_checking_lines(tree)
    own = own or module_name(path)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kgqa":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = own.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "kgqa":
                continue
            yield target, node.lineno
            for alias in node.names:  # `from kgqa.methods import ccor` imports the submodule
                candidate = f"{target}.{alias.name}"
                if _exists(candidate):
                    yield candidate, node.lineno
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("kgqa.")):
            yield str(node.args[0].value), node.lineno


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_part_has_a_floor() -> None:
    parts = {part_of(m) for m in all_modules()}
    assert parts <= set(FLOOR), f"parts without a floor in this test: {sorted(parts - set(FLOOR))}"


def test_no_arrow_points_up() -> None:
    upward = []
    for module, path in all_modules().items():
        here = FLOOR[part_of(module)]
        for target, line in imports_of(path):
            there_part = part_of(target)
            if there_part == part_of(module) or there_part not in FLOOR:
                continue
            if FLOOR[there_part] > here or (FLOOR[there_part] == here and here > 0 and there_part != part_of(module)
                                            and not _same_floor_allowed(part_of(module), there_part)):
                upward.append(f"{path.relative_to(SRC)}:{line}: {module} ({part_of(module)}) imports {target}")
    assert not upward, "imports that point up a floor:\n" + "\n".join(upward)


def _same_floor_allowed(here: str, there: str) -> bool:
    # kg, llm, text and the packaged data sit side by side. Parts of one floor may import each other only one way, and
    # only where listed: the demo builder uses the KG schema's id grammar, the text layer the relation verbaliser and
    # the LLM layer's thread settings. Nothing imports the test kit but tests.
    allowed = {("data", "kg"), ("text", "kg"), ("text", "llm")}
    return (here, there) in allowed


def test_no_import_cycles() -> None:
    modules = all_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for target, _line in imports_of(path):
            # An import of a.b.c also runs a and a.b; only edges between distinct modules of kgqa count, and a package
            # importing its own submodules (to re-export them) is not a cycle of design.
            if target in modules and target != module and not target.startswith(module + "."):
                graph[module].add(target)
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a list of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walker_sees_lazy_imports_and_skips_type_checking_ones(tmp_path: Path) -> None:
    # The checks above are only as good as the walker: prove it on a file written for the purpose.
    fake = tmp_path / "_floor_probe.py"
    fake.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from kgqa.eval.runner import run_eval\n"
                    "def f():\n    from kgqa.methods.registry import get_method\n    return get_method\n",
                    encoding="utf-8")
    found = {t for t, _ in imports_of(fake, "kgqa.steps._floor_probe")}
    assert "kgqa.methods.registry" in found and "kgqa.eval.runner" not in found
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
