"""The package layout holds: no import cycle between top-level packages, and a ROS-free model library.

Every import counts, function-level ones included, and so does a string naming one of our
modules (the `vam-stack` command table loads its subcommands by name), so a lazy import cannot
hide a cycle.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests", "build", "install"))
NODE_PACKAGES = {"vam_policy_node", "camera_bridge", "yam_driver", "tr_monitor_node"}
MODULE_STRING = re.compile(r"^(%s)(\.\w+)+$" % "|".join(PACKAGES))

pytestmark = pytest.mark.unit


def _imports(path: Path) -> set[str]:
    """Top-level names of everything `path` imports or names as a module string."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.add(node.value.split(".")[0])
    return found


def package_graph(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """{package: {imported package: [files]}} over the repository's top-level packages."""
    graph: dict[str, dict[str, list[str]]] = {p: defaultdict(list) for p in PACKAGES}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            for name in _imports(path):
                if name != pkg:
                    graph[pkg][name].append(str(path.relative_to(root)))
    return graph


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle in a directed graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(edges):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_no_import_cycle_between_top_level_packages():
    graph = package_graph()
    edges = {p: {q for q in deps if q in graph} for p, deps in graph.items()}
    cycle = find_cycle(edges)
    if cycle:
        where = [f"{a} -> {b}: {', '.join(graph[a][b][:3])}" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle " + " -> ".join(cycle) + "\n" + "\n".join(where))


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_a_lazy_or_string_import_counts(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from vam_sim.libero_mock import env\n\nTABLE = {'x': 'vam_bench.policy'}\n")
    assert {"vam_sim", "vam_bench"} <= _imports(f)


def test_the_model_library_imports_no_node_simulator_or_ros():
    graph = package_graph()
    banned = NODE_PACKAGES | {"vam_sim", "vam_train", "vam_experiments", "vam_bench", "vam_cli", "rclpy", "launch",
                              "launch_ros"}
    found = {dep: files for dep, files in graph["vam_model"].items() if dep in banned}
    assert not found, f"vam_model imports {found}"


def test_the_shared_base_imports_none_of_our_packages():
    graph = package_graph()
    found = {dep: files for dep, files in graph["vam_stack"].items() if dep in PACKAGES}
    assert not found, f"vam_stack (the shared base) imports {found}"


# what the training and data layers may import (issue 62): training reads datasets and trains the
# model; it runs no simulator (recovery rollouts come in as `rollouts`, vam_sim/collect_recovery.py)
# and no node package (the view fit applied to stored frames is vam_stack.views.fit_views)
ALLOWED_DEPS = {"vam_train": {"vam_data", "vam_model", "vam_stack"},
                "vam_data": {"vam_model", "vam_stack"}}


@pytest.mark.parametrize("pkg", sorted(ALLOWED_DEPS))
def test_training_and_data_import_only_their_layers(pkg):
    graph = package_graph()
    found = {dep: files for dep, files in graph[pkg].items() if dep in PACKAGES and dep not in ALLOWED_DEPS[pkg]}
    assert not found, f"{pkg} may import only {sorted(ALLOWED_DEPS[pkg])}; it imports {found}"


def module_graph(pkg: str, root: Path = ROOT) -> dict[str, set[str]]:
    """{module: {modules of the same package it imports}} for `pkg` (dotted names); imports inside
    functions count, relative ones are resolved, and `from a import b` names a.b when that is a module."""
    base = root / pkg
    modules = {".".join((pkg, *f.relative_to(base).with_suffix("").parts)).removesuffix(".__init__"): f
               for f in base.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        typing_only = {id(n) for b in ast.walk(tree) if isinstance(b, ast.If) and ast.unparse(b.test).endswith(
            "TYPE_CHECKING") for s in b.body for n in ast.walk(s)}    # annotations only: never imported at run time
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    up = parts[:len(parts) - node.level + 1]
                    src = ".".join(up + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                names = [f"{src}.{a.name}" if f"{src}.{a.name}" in modules else src for a in node.names]
            for name in names:
                while name and name not in modules:          # a.b.c imports the innermost module of ours
                    name = name.rpartition(".")[0]
                if name and name != mod and not mod.startswith(name + "."):   # a package's own __init__ is no loop
                    graph[mod].add(name)
    return graph


# the libraries carry no command line (issue 62): a command's argparse lives in vam_cli (the `vam-stack`
# subcommands) or in an application package (simulators, benchmarks, experiments, the leader's tools, nodes)
LIBRARIES = ("vam_model", "vam_data", "vam_train", "vam_control", "vam_stack")


@pytest.mark.parametrize("pkg", LIBRARIES)
def test_no_command_line_inside_a_library(pkg):
    found = sorted(str(f.relative_to(ROOT)) for f in (ROOT / pkg).rglob("*.py") if "argparse" in _imports(f))
    assert not found, f"argparse in the {pkg} library (its command line belongs in vam_cli/): {found}"


# imports at the top of the model, data and training libraries (issue 62): an import inside a function
# is one of these heavy or optional dependencies (each such line says why), or the backend registry
# importing the backend it was asked for
LAZY_ALLOWED = {"diffusers": "heavy (~2 s): only when a DiT, Wan VAE or solver is built, or a native file converted",
                "transformers": "heavy (~0.6 s): only when a text encoder loads",
                "peft": "heavy (~2 s): only a LoRA run",
                "onnx": "optional (export extra)", "onnxscript": "optional (export extra)",
                "onnxruntime": "optional (export extra)", "tensorrt": "optional (gpu extra)",
                "modelopt": "optional (FP8 quantisation)"}
LAZY_REGISTRY = {"vam_model/backends/__init__.py"}


@pytest.mark.parametrize("pkg", ("vam_model", "vam_data", "vam_train"))
def test_library_imports_are_at_the_top_unless_heavy_or_optional(pkg):
    found = []
    for path in sorted((ROOT / pkg).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), filename=rel)
        inner = {id(n): n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in inner.values():
            if isinstance(node, ast.ImportFrom) and node.level:
                ok = rel in LAZY_REGISTRY
            else:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                ok = all(n.split(".")[0] in LAZY_ALLOWED for n in names)
            if not ok:
                found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert not found, (f"imports inside functions in {pkg} (move them to the top, or add a heavy/optional "
                       f"dependency to LAZY_ALLOWED): {found}")


# loops still open (issue 62), each to be cut by moving the shared part to a lower module; a loop
# not listed here fails, and so does a listed one that is gone (remove it from the list)
KNOWN_CYCLES: dict = {}      # loops still open, per package (none: the last, yam_driver's bus factory, is gone)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycle_between_modules_of_a_package(pkg):
    # splits made to hold the size limit must not import each other: shared parts go to a lower module
    graph = module_graph(pkg)
    known = KNOWN_CYCLES.get(pkg, set())
    if known:
        assert find_cycle({a: b for a, b in graph.items() if a in known}), f"{pkg}: {sorted(known)} no longer loop"
    cycle = find_cycle({a: b - known if a in known else b for a, b in graph.items()})
    assert cycle is None, f"import cycle inside {pkg}: " + " -> ".join(cycle)


def test_the_module_cycle_check_finds_a_lazy_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("x = 1\n\ndef f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = module_graph("pkg", tmp_path)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


# the shared base's ROS modules: its rclpy helpers, and the operator's probe node (a node the
# record, ros-eval and bench commands spin in their own process, so it is no package's node.py)
SHARED_ROS_MODULES = {"vam_stack/ros.py", "vam_stack/probe.py"}


def test_only_node_modules_import_rclpy():
    offenders = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            if "rclpy" in _imports(path) and path.name != "node.py" and rel not in SHARED_ROS_MODULES:
                offenders.append(rel)
    assert not offenders, f"rclpy imported outside node.py / {sorted(SHARED_ROS_MODULES)}: {offenders}"


# the control loop (vam_control: executor, schedule, runtime, worker, safety filter, pacing) sits above
# the shared base and the model and below every node package: it imports no ROS and none of ours but those
CONTROL_MAY_IMPORT = {"vam_stack", "vam_model"}
# node modules: a simulator or benchmark library uses the control package, never a node
NODE_MODULES = ("vam_policy_node", "tr_monitor_node", "yam_driver.node", "camera_bridge.node", "yam_leader.node")


def _module_imports(path: Path) -> set[str]:
    """Dotted names of the modules `path` imports (`from a import b` gives a.b too), module strings included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.update({node.module, *(f"{node.module}.{a.name}" for a in node.names)})
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.match(node.value):
            found.add(node.value)
    return found


def test_the_control_package_imports_no_ros_and_no_node():
    graph = package_graph()
    found = {dep: files for dep, files in graph["vam_control"].items()
             if (dep in PACKAGES and dep not in CONTROL_MAY_IMPORT) or dep in ("rclpy", "launch", "launch_ros")}
    assert not found, f"vam_control may import only {sorted(CONTROL_MAY_IMPORT)} of ours and no ROS; it imports {found}"


def test_simulators_and_benchmarks_import_no_node():
    offenders = []
    for pkg in ("vam_sim", "vam_bench"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if path.name == "node.py":   # a node may spin others in its process
                continue
            bad = sorted(m for m in _module_imports(path) if any(m == n or m.startswith(n + ".") for n in NODE_MODULES))
            offenders += [f"{rel}: {m}" for m in bad]
    assert not offenders, f"simulator / benchmark code imports a node (use vam_control): {offenders}"


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", md.read_text()):
            target = m.group(1)
            if not target.startswith(("http://", "https://", "mailto:")) and not (md.parent / target).exists():
                broken.append(f"{md.relative_to(ROOT)} -> {target}")
    assert not broken, f"broken links: {broken}"


# public functions no source module calls, each with why it stays (an API for users or the
# message layer's symmetry); anything else only a test calls is a decoy beside the live path
USED_BY_USERS_OR_TESTS = {
    "write_dataset": "vam_data.dataset: write a dataset from Python (tests build theirs with it)",
    "build_instruction": "yam_driver.dxl_protocol: an instruction packet, what parse_stream reads",
    "read_info": "vam_stack.recording: read a recording's summary (users, tests)",
    "read_messages": "vam_stack.recording: read a recording's messages (users, tests)",
    "roundtrip": "vam_stack.msgs: serialise and read back, as a subscriber sees a message",
    "time_to_ns": "vam_stack.msg_base: the inverse of time_from_ns",
    "compress_image": "vam_stack.image_msgs: image_transport's compressed message of a raw one",
    "float32_value": "vam_stack.msgs: the reader beside float32_msg",
    "bool_msg": "vam_stack.msgs: std_msgs/Bool, checked (the e-stop topic's type)",
    "wait_until_busy": "vam_stack.process_graph: stop a graph mid-inference (scripts/graph_stop_times.py, tests)",
    "driver_refusals": "vam_stack.process_graph: the driver's refused targets in /diagnostics (the stop script, tests)",
}


def test_no_public_function_is_called_only_by_tests():
    sources = [f for p in PACKAGES for f in (ROOT / p).rglob("*.py")] + sorted((ROOT / "launch").glob("*.py"))
    text = "\n".join(f.read_text() for f in sources)
    unused = []
    for f in sources:
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                if len(re.findall(rf"\b{re.escape(node.name)}\b", text)) <= 1 and node.name not in USED_BY_USERS_OR_TESTS:
                    unused.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not unused, f"public functions only tests call (remove, or use them on the live path): {unused}"


def test_no_module_re_exports_what_it_imports():
    """Issue 69 row 3: ten `noqa: F401` shims re-exported names from the modules they had moved to
    (`msgs.image_msg` lived in image_msgs, `executor.robot_config` in schedule, `ros.timer` in refusals,
    `cli_eval` was two re-export lines): a name is imported from where it is defined. With flake8's F401
    on (tests/vam_stack/test_lint.py), the only way to keep an unused imported name is `noqa: F401`: it
    stays only on a plain `import x` done for its side effect (MUJOCO_GL before mujoco, onnxscript)."""
    shims = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            lines = path.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(lines), str(path))):
                if isinstance(node, ast.ImportFrom):
                    text = "\n".join(lines[node.lineno - 1:node.end_lineno])
                    if "noqa" in text and "F401" in text:
                        shims.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not shims, f"re-export shims (import the names from their home instead): {shims}"


# a class name defined twice is a reader's trap unless the two are plainly different things
SAME_NAME_OK = {"World": "vam_sim.libero_mock.world.World (the mock's bodies) and vam_sim.yam_mujoco.tasks.World "
                         "(the Protocol a MuJoCo task reads): two simulators, each with its own world"}


def test_no_two_classes_share_a_name():
    """Issue 69 row 3: two classes were named `Replan` (vam_model.replan's working state of one replan,
    vam_stack.tr_trace's record of one, now `ReplanRecord`)."""
    where: dict[str, list[str]] = defaultdict(list)
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: files for name, files in where.items() if len(files) > 1 and name not in SAME_NAME_OK}
    assert not twice, f"classes of one name in several modules (rename one to say what it is): {twice}"
    assert where["Replan"] == ["vam_model/replan.py"]


# a target's stamp windows (how old, how far ahead): names that hold one, and the one module that writes them
STAMP_WINDOWS = re.compile(r"^(FUTURE_TOLERANCE_S|STALE_AFTER_S|future_tolerance_s|stale_after_s|watchdog_s)$")
NOT_A_TARGET_WINDOW = {"tr_monitor_node/monitor.py": "stale_after_s: silence of the TR telemetry (5 s) before "
                                                     "diagnostics say 'stale', not a joint target's age"}


def test_the_stamp_windows_are_written_once():
    """Issue 69 row 3: three future-stamp constants in three files (0.05 in the safety filter, 0.05 as the
    target gate's default, 0.005 in the driver core) and the 0.2 s stale window as two defaults. Each is a
    number once, in vam_stack/stamps.py; every layer imports it (a config may still set its own)."""
    written = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == "vam_stack/stamps.py" or rel in NOT_A_TARGET_WINDOW:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
                value = getattr(node, "value", None)
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                    if STAMP_WINDOWS.match(name) and isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
                        written.append(f"{rel}:{node.lineno} {name} = {value.value}")
    assert not written, f"a stamp window written outside vam_stack/stamps.py (import it from there): {written}"


def test_the_vam_stack_docstring_says_what_the_package_holds():
    """Issue 69 row 3: vam_stack's first docstring still described a CLI that had moved to vam_cli."""
    doc = ast.get_docstring(ast.parse((ROOT / "vam_stack" / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in (ROOT / "vam_stack").glob("*.py") if p.stem != "__init__")
    unnamed = [m for m in modules if f"`{m}`" not in doc]
    assert not unnamed, f"vam_stack/__init__.py's docstring does not name {unnamed}"


MAX_MODULE_LINES = 500    # a module over this holds more than one concern: split it by concern


def test_no_module_over_500_lines():
    long = []
    for p in PACKAGES:
        for f in (ROOT / p).rglob("*.py"):
            n = len(f.read_text().splitlines())
            if n > MAX_MODULE_LINES:
                long.append(f"{f.relative_to(ROOT)} ({n} lines)")
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


FINDABLE = {"TR": "ratio_from_masses", "guidance": "combine_velocities", "current-frame input": "def infer",
            "tick": "def target", "prefix cache": "def prefix_cache", "safety filter": "class SafetyFilter",
            "fault detection": "class JointHealth", "the robot's timing": "rate_hz"}


def test_each_core_concept_is_found_within_three_files_named_in_components_md():
    table = (ROOT / "docs" / "components.md").read_text()
    for concept, needle in FINDABLE.items():
        row = next((line for line in table.splitlines() if line.startswith(f"| {concept} ")), None)
        assert row, f"docs/components.md has no 'Where things live' row for {concept!r}"
        files = re.findall(r"`([\w/]+\.py)`", row)
        assert 1 <= len(files) <= 3, f"{concept}: {files}"    # issue 62: each readable in <= 3 files
        assert any(needle in (ROOT / f).read_text() for f in files), f"{concept}: {needle!r} is in none of {files}"


def test_test_modules_import_without_a_package_and_have_unique_names():
    """With ROS 2 sourced, launch_testing's pytest hook imports every test module in pytest's default
    (prepend) import mode, without a package: a relative import between test modules fails there
    (issue 67 row 5: `tests/vam_control`, `tests/vam_data` stopped collection), and two test modules of
    one name in different folders would be one module. Shared helpers live in tests/support
    (pytest.ini's `pythonpath`), imported by name."""
    modules = sorted((ROOT / "tests").rglob("*.py"))
    relative = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                relative.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not relative, f"relative imports in test code (move the shared part to tests/support): {relative}"
    names = [p.name for p in modules if p.name.startswith("test_")]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    support = ROOT / "tests" / "support"
    assert "pythonpath = tests/support" in (ROOT / "pytest.ini").read_text()
    taken = {p.stem for p in modules} | set(PACKAGES)
    for helper in support.glob("*.py"):
        assert not helper.name.startswith("test_") and helper.stem not in taken - {helper.stem}, helper
