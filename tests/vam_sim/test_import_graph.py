"""The modules of vam_sim import each other without a loop: every import counts, at the top, inside a
function or under TYPE_CHECKING, so the order of things is the order of the files (the MuJoCo YAM's
config -> tasks -> sim -> config loop was one: a task names its world through `tasks.World`)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def _module_graph(package: str) -> dict[str, set[str]]:
    files = {}
    for f in (ROOT / package).rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in files.items():
        here = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                subs = {f"{base}.{a.name}" for a in node.names}
                # `from . import frames` needs the submodule; `from .x import f` needs x
                deps |= subs if subs <= set(files) else {base}
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}        # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_vam_sim_modules_import_without_a_loop():
    cycle = _cycle(_module_graph("vam_sim"))
    assert cycle is None, "import loop " + " -> ".join(cycle)


def test_the_check_sees_a_loop():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    graph = _module_graph("vam_sim")
    assert {"vam_sim.yam_mujoco.config", "vam_sim.yam_mujoco.tasks"} <= graph["vam_sim.yam_mujoco.sim"]
    assert "vam_sim.yam_mujoco.config" in graph["vam_sim.yam_mujoco.tasks"]
