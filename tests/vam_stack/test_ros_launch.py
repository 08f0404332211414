"""Launch files, their table (vam_stack/launch_args.py), parameter files, rviz/rqt layouts and
package metadata, checked statically (launch_ros is not on the package index); the launch
descriptions themselves are built where launch_ros exists. The same table's processes run over
DDS in test_ros_graph_processes.py."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from vam_stack import launch_args
from vam_stack.topics import resolve

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
NODE_MODULES = {"camera_bridge": "camera_bridge.node", "vam_policy_node": "vam_policy_node.node",
                "tr_monitor_node": "tr_monitor_node.node", "yam_driver": "yam_driver.node",
                "libero_bridge": "vam_sim.libero_mock.node",
                "yam_mujoco_sim": "vam_sim.yam_mujoco.node",
                "demo_recorder": "vam_data.node", "yam_leader": "yam_leader.node"}  # executable = node name -> module
HAVE_LAUNCH_ROS = importlib.util.find_spec("launch_ros") is not None


def console_scripts() -> dict[str, str]:
    """name -> "module:function" from setup.py's entry_points (parsed, not executed)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    return dict(s.split("=", 1) for s in (e.value.replace(" ", "") for e in v.elts))
    raise AssertionError("setup.py has no console_scripts")


def launched_nodes(path: Path) -> list[dict]:
    """Every Node(...) call of a launch file: its constant keywords and parameter dict keys."""
    out = []
    for call in ast.walk(ast.parse(path.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Node":
            kw = {k.arg: k.value for k in call.keywords}
            entry = {k: v.value for k, v in kw.items() if isinstance(v, ast.Constant)}
            entry["param_keys"] = [k.value for d in ast.walk(kw["parameters"]) if isinstance(d, ast.Dict)
                                   for k in d.keys] if "parameters" in kw else []
            out.append(entry)
    return out


def declared_arguments(path: Path) -> set[str]:
    """Arguments a launch file declares: its DeclareLaunchArgument calls and `declare(NAME)` of
    the shared table (vam_stack/launch_args.py)."""
    tree = ast.parse(path.read_text())
    names = set()
    for c in ast.walk(tree):
        if isinstance(c, ast.Call) and c.args and isinstance(c.args[0], ast.Constant):
            fn = getattr(c.func, "id", None)
            if fn == "DeclareLaunchArgument":
                names.add(c.args[0].value)
            elif fn == "declare":
                names |= set(launch_args.arguments(c.args[0].value))
    return names


def used_arguments(path: Path) -> set[str]:
    """Arguments a launch file reads: LaunchConfiguration (as `arg`) in the file, and what the
    table's processes read (`node_actions(NAME)`: params_file, each parameter's argument, `sim`
    for a conditional process)."""
    calls = [c for c in ast.walk(ast.parse(path.read_text())) if isinstance(c, ast.Call)]
    used = {c.args[0].value for c in calls
            if getattr(c.func, "id", None) in ("arg", "LaunchConfiguration")
            and c.args and isinstance(c.args[0], ast.Constant)}
    for c in calls:
        if getattr(c.func, "id", None) == "node_actions":
            rows = launch_args.nodes(c.args[0].value)
            used |= {"params_file"} | {a for n in rows for a, _ in n.parameters.values()}
            used |= {"sim"} if any(n.when for n in rows) else set()
        if getattr(c.func, "id", None) == "gui_actions":
            used |= set(launch_args.GUI) & set(launch_args.arguments(c.args[0].value))
    return used


def node_params(executable: str) -> dict:
    module = importlib.import_module(NODE_MODULES[executable])
    # the driver and the camera bridge declare process_rt_priority only where they own their hardware
    # (OWN_BUS_PARAMS, OWN_CAMERA_PARAMS: not in yam_mujoco_sim)
    own = (*getattr(module, "OWN_BUS_PARAMS", ()), *getattr(module, "OWN_CAMERA_PARAMS", ()))
    return {p.name: p for p in (*module.PARAMS, *own)}


def test_launch_files_exist_and_declare_their_arguments():
    assert [p.name for p in LAUNCH_FILES] == ["record.launch.py", "robot.launch.py", "sim.launch.py"]
    common = {"params_file", "checkpoint", "guidance", "preset", "use_rviz", "use_rqt"}
    assert {"sim", "sim_task", "seed", "teleop", "out_dir", "params_file"} <= declared_arguments(LAUNCH_FILES[0])
    assert common | {"instruction", "use_emulated_driver", "camera_config"} <= declared_arguments(LAUNCH_FILES[1])
    assert common | {"suite", "task", "episodes"} <= declared_arguments(LAUNCH_FILES[2])
    for path in LAUNCH_FILES:
        undeclared = used_arguments(path) - declared_arguments(path)
        assert not undeclared, f"{path.name} reads undeclared arguments {undeclared}"
        unused = declared_arguments(path) - used_arguments(path)
        assert not unused, f"{path.name} declares arguments it never reads {unused}"


def test_the_launch_argument_table_is_checked():
    assert set(launch_args.arguments("robot")) >= {"camera_config", "use_emulated_driver", "use_rviz"}
    assert launch_args.arguments("sim")["preset"][0] == "libero64"
    with pytest.raises(ValueError, match="robot"):
        launch_args.arguments("mujoco")
    from vam_sim.yam_mujoco.tasks import TASKS   # the table (in the shared base) cannot import the simulator
    assert set(launch_args.CHOICES["sim_task"]) == set(TASKS) == set(node_params("yam_mujoco_sim")["task"].choices)
    assert launch_args.arguments("robot")["sim_task"][0] in TASKS


@pytest.mark.parametrize("launch", launch_args.LAUNCH_FILES)
def test_every_launched_executable_is_an_entry_point_with_a_main(launch):
    scripts = console_scripts()
    path = ROOT / "launch" / f"{launch}.launch.py"
    assert "node_actions" in path.read_text() and not [n for n in launched_nodes(path) if n.get("package") == "vam_stack"]
    for n in launch_args.nodes(launch):
        exe = n.executable
        assert exe in scripts, f"{launch}: executable {exe!r} is not a console_scripts entry point"
        module, func = scripts[exe].split(":")
        assert module == NODE_MODULES[exe] and callable(getattr(importlib.import_module(module), func))
        unknown = set(n.parameters) - set(node_params(exe)) - {"use_sim_time"}   # (rclpy declares that one)
        assert not unknown, f"{launch}: {exe} gets undeclared parameters {unknown}"
        assert n.name in (None, exe), "a node's launch name is its own name: its params-file section"
        for param, (arg, kind) in n.parameters.items():
            assert kind in launch_args.KINDS and arg in launch_args.arguments(launch)
            if param == "use_sim_time":
                assert kind == "sim_time"
                continue
            default = node_params(exe)[param].default
            assert type(launch_args.typed(kind, launch_args.arguments(launch)[arg][0])) is type(default), (launch, param)
    others = {n["package"] for n in launched_nodes(path)}
    assert others <= {"rviz2", "rqt_gui"}


def test_every_launch_file_is_headless_by_default_and_a_missing_viewer_is_said_not_fatal():
    """A robot computer with ros-base has no rviz2: `ros2 launch vam_stack robot.launch.py` with the
    defaults failed after starting the stack ("package 'rviz2' not found") and left it running."""
    for launch in launch_args.LAUNCH_FILES:
        for flag in launch_args.GUI:
            if flag in launch_args.arguments(launch):
                assert launch_args.arguments(launch)[flag][0] == "false", (launch, flag)
        assert launch_args.gui_plan(launch_args.resolve(launch, {}), installed=lambda p: True) == []
    values = launch_args.resolve("robot", {"use_rviz": "true", "use_rqt": "1"})
    plan = launch_args.gui_plan(values, installed=lambda package: package == "rqt_gui")
    assert [(flag, start) for flag, start, _ in plan] == [("use_rviz", False), ("use_rqt", True)]
    assert "'rviz2' is not installed" in plan[0][2] and "not started" in plan[0][2]
    import os
    saved = os.environ.pop("AMENT_PREFIX_PATH", None)   # nothing sourced: a package is simply not found
    try:
        assert launch_args.package_installed("rviz2") is False
    finally:
        if saved is not None:
            os.environ["AMENT_PREFIX_PATH"] = saved
    for path in LAUNCH_FILES:       # no unconditional Node of another package: viewers come from gui_actions
        assert not [n for n in launched_nodes(path) if n.get("package") in ("rviz2", "rqt_gui")], path.name
        if "use_rviz" in declared_arguments(path):
            assert "gui_actions(" in path.read_text(), path.name


def test_the_policy_backend_defaults_to_auto_onnxruntime_on_a_cpu_as_vam_stack_sim():
    """The robot graph ran torch on a CPU by default: a yam64 replan took 7-16 s (onnxruntime 0.13-0.4 s)."""
    from vam_policy_node.params import resolve_backend

    for launch in ("robot", "sim"):
        policy = next(p for p in launch_args.processes(launch) if p.executable == "vam_policy_node")
        assert policy.overrides["backend"] == "auto" == node_params("vam_policy_node")["backend"].default, launch
    assert resolve_backend("auto", "cpu") == "onnxruntime" and resolve_backend("torch", "cpu") == "torch"
    assert launch_args.processes("robot", {"backend": "torch"})[1].overrides["backend"] == "torch"


def test_processes_follow_the_launch_conditions_and_type_their_parameters():
    robot = {p.executable: p for p in launch_args.processes("robot")}
    assert list(robot) == ["camera_bridge", "vam_policy_node", "tr_monitor_node", "yam_driver"]
    assert robot["yam_driver"].overrides == {"use_emulator": False, "bus": "damiao", "config_file": "", "safety_config": ""}
    assert robot["vam_policy_node"].params_file.endswith("config/vam_stack.params.yaml")
    emu = {p.executable: p for p in launch_args.processes("robot", {"use_emulated_driver": " TRUE "})}
    assert emu["yam_driver"].overrides == {"use_emulator": True, "bus": "damiao", "config_file": "", "safety_config": ""}
    mujoco = launch_args.processes("robot", {"sim": "mujoco", "preset": "yam64", "instruction": "hand it over"})
    assert [p.executable for p in mujoco] == ["vam_policy_node", "tr_monitor_node", "yam_mujoco_sim"]
    policy, _, world = mujoco
    assert policy.overrides["preset"] == "yam64" and policy.overrides["instruction"] == "hand it over"
    assert world.name is None and world.overrides == {"task": "handover", "safety_config": "", "use_sim_time": True}
    assert policy.overrides["use_sim_time"] is True and robot["vam_policy_node"].overrides["use_sim_time"] is False
    argv = policy.argv("/tmp/o.yaml")
    assert argv[:4] == ["vam_policy_node", "--ros-args", "-r", "__node:=vam_policy_node"]
    assert argv[4:] == ["--params-file", policy.params_file, "--params-file", "/tmp/o.yaml"]
    assert "__node" not in " ".join(world.argv(None))          # one process, three nodes keep their names
    assert yaml.safe_load(policy.overrides_yaml())["/**"]["ros__parameters"]["preset"] == "yam64"
    sim = launch_args.processes("sim", {"task": "3", "episodes": "2"})
    assert sim[0].overrides == {"suite": "goal", "first_task": 3, "episodes": 2}
    record = lambda **given: [p.executable for p in launch_args.processes("record", given)]  # noqa: E731
    assert record() == ["yam_mujoco_sim", "demo_recorder"]
    assert record(sim="none", teleop="leader") == ["camera_bridge", "yam_driver", "yam_leader", "demo_recorder"]
    assert record(sim="none", teleop="none") == ["camera_bridge", "yam_driver", "demo_recorder"]


@pytest.mark.parametrize("launch, given, match", [
    ("robot", {"sim": "mujok"}, r"sim:='mujok' must be one of"),
    ("robot", {"use_emulated_driver": "yes"}, "use_emulated_driver"),
    ("sim", {"episodes": "three"}, "must be an integer"),
    ("sim", {"tsk": "1"}, "did you mean 'task'"),
    ("robot", {"params_file": "/nowhere/params.yaml"}, "is not a file"),
    ("record", {"sim": "mujoco", "teleop": "leader"}, "leader arm on the hardware"),
])
def test_bad_launch_arguments_are_refused_before_anything_starts(launch, given, match):
    with pytest.raises(launch_args.LaunchArgumentError, match=match):
        launch_args.processes(launch, given)


def test_launch_tests_wait_only_on_reliable_topics():
    """launch_testing_ros's WaitForTopics subscribes reliable: on a best-effort topic it never
    receives anything, and the test times out on a ROS machine."""
    for path in ROOT.glob("tests/**/test_launch_*.py"):
        tree = ast.parse(path.read_text())
        waited = [elt.elts[0].value for a in ast.walk(tree) if isinstance(a, ast.Assign)
                  and getattr(a.targets[0], "id", "") == "topics" for elt in a.value.elts]
        assert waited, f"{path.name}: no topics list found"
        for name in waited:
            assert resolve(name).qos_spec.reliability == "reliable", f"{path.name} waits reliably on best-effort {name}"


@pytest.mark.parametrize("name", ["vam_stack.params.yaml", "vam_stack_sim.params.yaml"])
def test_parameter_files_name_declared_parameters_with_their_types(name):
    data = yaml.safe_load((ROOT / "config" / name).read_text())
    for node, section in data.items():
        params = node_params(node)
        values = section["ros__parameters"]
        unknown = set(values) - set(params)
        assert not unknown, f"{name}: {node} has no parameters {unknown}"
        for key, value in values.items():
            want = type(params[key].default)
            assert type(value) is want, f"{name}: {node}.{key} = {value!r} is {type(value).__name__}, declared {want.__name__}"
            if params[key].choices:
                assert value in params[key].choices
            if params[key].range:
                assert params[key].range[0] <= value <= params[key].range[1]


def test_rviz_displays_show_table_images_with_a_qos_their_publisher_serves():
    cfg = yaml.safe_load((ROOT / "config" / "vam_stack.rviz").read_text())
    shown = {}
    for d in cfg["Visualization Manager"]["Displays"]:
        assert d["Class"] == "rviz_default_plugins/Image"
        t = resolve(d["Topic"]["Value"])
        assert t.msgtype == "sensor_msgs/msg/Image"
        if d["Topic"]["Reliability Policy"] == "Reliable":
            assert t.qos_spec.reliability == "reliable", f"{t.name} is best effort; a reliable display gets nothing"
        shown[t.name] = d["Name"]
    assert set(shown) == {"/camera/stacked/image_raw", "/tr_monitor/trace_image", "/tr_monitor/attention_overlay"}


def test_rqt_perspective_plots_tr_s_and_weights_and_shows_the_images():
    groups = json.loads((ROOT / "config" / "vam_stack.perspective").read_text())["groups"]["pluginmanager"]["groups"]
    plotted, images = [], []
    for name, g in groups.items():
        keys = g["groups"]["plugin"]["keys"]
        if "rqt_plot" in name:
            plotted += ast.literal_eval(keys["topics"]["repr"])
        else:
            images.append(ast.literal_eval(keys["topic"]["repr"]))
    assert {"/vam/tr/data", "/vam/tr0/data", "/vam/s/data", "/vam/w_lang/data", "/vam/w_plan/data"} <= set(plotted)
    for field in plotted:
        assert resolve(field.rsplit("/", 1)[0]).msgtype == "std_msgs/msg/Float32"
    assert {resolve(t).msgtype for t in images} == {"sensor_msgs/msg/Image"}


def test_package_xml_is_format_3_and_depends_on_what_nodes_and_launch_files_use():
    root = ET.parse(ROOT / "package.xml").getroot()
    assert root.tag == "package" and root.get("format") == "3"
    tags = [c.tag for c in root]
    for required in ("name", "version", "description", "maintainer", "license"):
        assert required in tags, f"package.xml lacks <{required}>"
    assert tags.index("name") < tags.index("version") < tags.index("description") < tags.index("maintainer")
    assert root.find("name").text == "vam_stack" and root.find("export/build_type").text == "ament_python"
    deps = {c.text for c in root if c.tag in ("exec_depend", "depend")}
    ros_pkgs = {"rclpy", "rcl_interfaces", "std_srvs", "sensor_msgs", "std_msgs", "diagnostic_msgs"}
    used = set()
    for module in [*NODE_MODULES.values(), "vam_stack.ros"]:
        tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            used |= {n.split(".")[0] for n in names} & ros_pkgs
    for path in LAUNCH_FILES:
        used |= {"launch", "launch_ros"} | {n["package"] for n in launched_nodes(path)} - {"vam_stack"}
    for module in ("vam_stack.launch_args",):   # the table's launch_ros side
        tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
        used |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} \
            & {"launch", "launch_ros"}
    assert used - deps == set(), f"package.xml lacks exec_depend on {sorted(used - deps)}"


@pytest.mark.skipif(not HAVE_LAUNCH_ROS, reason="launch_ros is not installed (not on the package index); "
                                                "the launch files are checked statically above")
@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_descriptions_build(path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ld = module.generate_launch_description()
    assert len(ld.entities) >= 5
