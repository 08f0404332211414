"""The launch files' one table: their arguments, the vam_stack processes they start and the
parameters each process gets from an argument.

Two readers, one table:
- `launch/robot.launch.py` and `launch/sim.launch.py` declare `declare(launch)` and start
  `node_actions(launch)` (launch_ros `Node` actions; `launch` and `launch_ros` are imported only
  there);
- `processes(launch, args)` turns the same rows into the command lines launch_ros would run
  (`<exe> --ros-args -r __node:=<name> --params-file <params_file> --params-file <overrides>`,
  the overrides written as launch_ros writes a parameter dict: under `/**`), with the launch's
  conditions evaluated. `vam-stack ros-graph` and the process-level tests start exactly those,
  so a machine without launch_ros (a pip-installed rclpy) runs the launch files' wiring.

Argument values are checked here before anything starts: an unknown name, a value outside a
closed set, a flag that is not true/false/1/0 or an integer that is not one, a preset that names no
model YAML, a params or camera file that is missing or not a YAML mapping, an instruction a policy
would refuse (blank, over 2000 characters) is an error naming it. Under `ros2 launch` the same
check runs first (`check_action`), so a refused argument starts no process.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .names import GUIDANCE_SCHEDULES, YAM_TASKS

LAUNCH_FILES = ("robot", "sim", "record")

# the node-parameters YAML each launch file passes every process first (argument params_file)
PARAMS_FILES = {"robot": "vam_stack.params.yaml", "sim": "vam_stack_sim.params.yaml",
                "record": "vam_stack.params.yaml"}

# name: (description, {launch file: default}); "" config paths = the shipped config/ files
TABLE: dict[str, tuple[str, dict[str, str]]] = {
    "params_file": ("node parameters YAML; empty = the shipped config/vam_stack.params.yaml (robot) or "
                    "config/vam_stack_sim.params.yaml (sim, record: vam_stack.params.yaml)",
                    {"robot": "", "sim": "", "record": ""}),
    "camera_config": ("camera bridge YAML; empty = config/cameras.yaml", {"robot": "", "record": ""}),
    "preset": ("model preset used when no checkpoint is given", {"robot": "real", "sim": "libero64"}),
    "checkpoint": ("policy checkpoint (safetensors); empty = models/<preset>.safetensors if shipped",
                   {"robot": "", "sim": ""}),
    "guidance": (f"guidance schedule: {' | '.join(GUIDANCE_SCHEDULES)}", {"robot": "tr_adaptive", "sim": "tr_adaptive"}),
    "backend": ("runtime of the DiT calls: auto (onnxruntime on a CPU, torch on CUDA, as `vam-stack sim` picks) | "
                "torch | onnxruntime | tensorrt", {"robot": "auto", "sim": "auto"}),
    "device": ("where the policy runs: auto (CUDA when present) | cpu | cuda | cuda:N", {"robot": "auto", "sim": "auto"}),
    "instruction": ("start an episode with this instruction once inputs arrive", {"robot": ""}),
    "use_emulated_driver": ("drive emulated motors instead of the arm (those of `bus`)", {"robot": "false"}),
    "bus": ("the follower arm's bus (yam_driver): damiao = the YAM's Damiao motors over CAN (can_left, can_right); "
            "dynamixel = Dynamixel servos; emulated = emulated Damiao motors, no hardware (use_emulated_driver:=true)",
            {"robot": "damiao"}),
    "driver_config": ("the driver's YAML (section yam_driver), a path; empty = config/yam_driver_<bus>.yaml "
                      "(emulated: damiao). Its `bus:` must be the bus argument's", {"robot": ""}),
    "safety_config": ("the safety filter's YAML (section yam_safety), one file for the policy node's filter and the "
                      "driver's check that its own limits sit inside it; empty = config/yam_safety.yaml",
                      {"robot": ""}),
    "suite": ("LIBERO suite (spatial, object, goal, long and the _ood variants)", {"sim": "goal"}),
    "task": ("task of the first episode (0-9)", {"sim": "0"}),
    "episodes": ("episodes to run", {"sim": "10"}),
    "sim": ("the arm: none = the hardware (or emulated motors); mujoco = the simulated YAM (yam_mujoco_sim: "
            "MuJoCo world, camera bridge and driver in one process)", {"robot": "none", "record": "mujoco"}),
    "sim_task": (f"MuJoCo task with sim:=mujoco: {' | '.join(YAM_TASKS)}", {"robot": "handover", "record": "handover"}),
    "seed": ("seed of the MuJoCo scene's initial state (vam-stack record passes each episode's)", {"record": "0"}),
    "teleop": ("who moves the arm: expert = the scripted expert through a safety filter, after yam_mujoco_sim's "
               "~/start_teleop (sim:=mujoco); leader = a leader arm read by yam_leader (config/yam_leader.yaml), "
               "through a safety filter after /yam_leader/engage (sim:=none); none = nobody",
               {"record": "expert"}),
    "out_dir": ("folder the demo recorder writes <prefix>_<NNN>.mcap episodes into", {"record": "runs/recordings"}),
    "use_rviz": ("start rviz2 with config/vam_stack.rviz (only where the rviz2 package is installed: elsewhere "
                 "launch says so and starts the rest)", {"robot": "false", "sim": "false"}),
    "use_rqt": ("start rqt with config/vam_stack.perspective (only where the rqt_gui package is installed: "
                "elsewhere launch says so and starts the rest)", {"robot": "false", "sim": "false"}),
}

# the optional viewers (headless by default: a robot computer with ros-base has neither):
# flag argument -> (package, executable, node name, arguments before / after the shipped layout file)
GUI: dict[str, tuple[str, str, str, str, str]] = {
    "use_rviz": ("rviz2", "rviz2", "rviz2", "-d", "vam_stack.rviz"),
    "use_rqt": ("rqt_gui", "rqt_gui", "rqt", "--perspective-file", "vam_stack.perspective"),
}


def package_installed(package: str) -> bool:
    """Whether ament's index (a sourced ROS 2 install) has `package`; False without ament_index_python."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return False
    try:
        get_package_prefix(package)
    except (PackageNotFoundError, KeyError, ValueError, OSError):   # OSError: no AMENT_PREFIX_PATH (no ROS 2 sourced)
        return False
    return True


def gui_plan(values: Mapping[str, str], installed=package_installed) -> list[tuple[str, bool, str]]:
    """(flag argument, start?, what launch says) for each viewer asked for by the resolved argument
    `values`: a viewer whose package is missing is not started and said, never a launch failure
    (launch failed on the missing package after starting the stack, and left those nodes running)."""
    out = []
    for flag, (package, *_rest) in GUI.items():
        if flag in values and typed("flag", values[flag], flag):
            if installed(package):
                out.append((flag, True, f"{flag}:=true: starting {package}"))
            else:
                out.append((flag, False, f"{flag}:=true but package {package!r} is not installed here (a headless "
                                          f"ROS 2 base install): not started; the stack runs without it"))
    return out

# arguments with a closed set of values: launch refuses anything else before a node starts
CHOICES: dict[str, tuple[str, ...]] = {
    "guidance": GUIDANCE_SCHEDULES,
    "backend": ("auto", "torch", "onnxruntime", "tensorrt"),
    "sim": ("none", "mujoco"),
    "sim_task": YAM_TASKS,
    "teleop": ("none", "expert", "leader"),
    "bus": ("damiao", "dynamixel", "emulated"),
}

# what launch's conditions take as a boolean on Humble and Jazzy (any case, surrounding spaces)
BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
KINDS = ("text", "integer", "flag", "sim_time", "bus", "emulated")   # how an argument becomes a typed parameter.
# sim_time: true when the argument (`sim`) is "mujoco": the simulated world publishes /clock, every node uses it.
# The driver's bus argument (`bus`) gives two: bus: the driver's `bus` parameter (emulated -> damiao); emulated:
# the flag (use_emulated_driver) or bus:=emulated


@dataclass(frozen=True)
class LaunchedNode:
    """One vam_stack process a launch file starts."""

    executable: str               # console script of setup.py (installed under lib/vam_stack by colcon)
    name: str | None              # node name given at launch; None: a process of several nodes keeps theirs
    parameters: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # parameter -> (argument, kind)
    when: str = ""                # "" always; "mujoco" only with sim:=mujoco; "hardware" only with sim:=none;
                                  # "leader" only with sim:=none and teleop:=leader


_SIM_TIME = {"use_sim_time": ("sim", "sim_time")}
_SAFETY = {"safety_config": ("safety_config", "text")}   # one safety file for the policy's filter and the driver's check
_POLICY = {"preset": ("preset", "text"), "checkpoint": ("checkpoint", "text"), "guidance": ("guidance", "text"),
           "backend": ("backend", "text"), "device": ("device", "text")}

NODES: dict[str, tuple[LaunchedNode, ...]] = {
    "robot": (
        LaunchedNode("camera_bridge", "camera_bridge", {"config_file": ("camera_config", "text")}, when="hardware"),
        LaunchedNode("vam_policy_node", "vam_policy_node", {**_POLICY, "instruction": ("instruction", "text"),
                                                            **_SAFETY, **_SIM_TIME}),
        LaunchedNode("tr_monitor_node", "tr_monitor_node", dict(_SIM_TIME)),
        LaunchedNode("yam_driver", "yam_driver", {"use_emulator": ("use_emulated_driver", "emulated"),
                                                  "bus": ("bus", "bus"), "config_file": ("driver_config", "text"),
                                                  **_SAFETY}, when="hardware"),
        # one process, three nodes (yam_mujoco_sim, camera_bridge, yam_driver): no name, which would rename all three
        LaunchedNode("yam_mujoco_sim", None, {"task": ("sim_task", "text"), **_SAFETY, **_SIM_TIME}, when="mujoco"),
    ),
    "sim": (
        LaunchedNode("libero_bridge", "libero_bridge", {"suite": ("suite", "text"), "first_task": ("task", "integer"),
                                                        "episodes": ("episodes", "integer")}),
        LaunchedNode("vam_policy_node", "vam_policy_node", dict(_POLICY)),
        LaunchedNode("tr_monitor_node", "tr_monitor_node"),
    ),
    "record": (
        LaunchedNode("camera_bridge", "camera_bridge", {"config_file": ("camera_config", "text")}, when="hardware"),
        LaunchedNode("yam_driver", "yam_driver", when="hardware"),
        LaunchedNode("yam_mujoco_sim", None, {"task": ("sim_task", "text"), "seed": ("seed", "integer"),
                                              "teleop": ("teleop", "text"), **_SIM_TIME}, when="mujoco"),
        LaunchedNode("yam_leader", "yam_leader", when="leader"),
        LaunchedNode("demo_recorder", "demo_recorder", {"out_dir": ("out_dir", "text"), **_SIM_TIME}),
    ),
}


class LaunchArgumentError(ValueError):
    """A launch argument with an unknown name or a value its row does not allow."""


def _check_launch(launch: str) -> None:
    if launch not in LAUNCH_FILES:
        raise ValueError(f"launch must be one of {LAUNCH_FILES}, got {launch!r}")


def arguments(launch: str) -> dict[str, tuple[str, str]]:
    """name -> (default, description) of the arguments launch file `launch` declares."""
    _check_launch(launch)
    return {name: (defaults[launch], text_) for name, (text_, defaults) in TABLE.items() if launch in defaults}


def nodes(launch: str) -> tuple[LaunchedNode, ...]:
    _check_launch(launch)
    return NODES[launch]


def resolve(launch: str, given: Mapping[str, str]) -> dict[str, str]:
    """Every argument of `launch`: the defaults with `given` over them, each checked."""
    declared = arguments(launch)
    values = {name: default for name, (default, _) in declared.items()}
    for name, value in given.items():
        if name not in declared:
            near = difflib.get_close_matches(name, declared, n=1)
            raise LaunchArgumentError(f"{launch}.launch.py has no argument {name!r}"
                                      + (f" (did you mean {near[0]!r}?)" if near else "")
                                      + f"; it takes {sorted(declared)}")
        values[name] = str(value)
    for name, value in values.items():
        if name in CHOICES and value not in CHOICES[name]:
            raise LaunchArgumentError(f"argument {name}:={value!r} must be one of {list(CHOICES[name])}")
    if values.get("teleop") == "leader" and values.get("sim") == "mujoco":
        raise LaunchArgumentError("argument teleop:='leader' reads a leader arm on the hardware (sim:=none); "
                                  "the simulated arm is teleoperated by teleop:=expert")
    if "bus" in values:
        _check_bus(values, given)
    _check_files_and_text(launch, values)
    for node in NODES[launch]:   # a typed parameter from a value that is not of its type fails here, named
        for param, (arg, kind) in node.parameters.items():
            typed(kind, values[arg], f"{arg} (parameter {param} of {node.executable})", values)
    return values


def _yaml_mapping(name: str, path: Path) -> None:
    """Argument `name`'s file at `path` exists and holds a YAML mapping (LaunchArgumentError naming it)."""
    import yaml

    if not path.is_file():
        raise LaunchArgumentError(f"argument {name}:={str(path)!r} is not a file")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise LaunchArgumentError(f"argument {name}:={str(path)!r} is not YAML: {first}") from None
    if not isinstance(data, dict):
        raise LaunchArgumentError(f"argument {name}:={str(path)!r} holds {type(data).__name__}, not a YAML mapping "
                                  f"of sections")


def _check_files_and_text(launch: str, values: Mapping[str, str]) -> None:
    """What a node would otherwise end on after launch had started the rest (issue 71 row 8): the preset
    names a model YAML, the params, camera and safety files exist and are YAML mappings (the safety file
    with its yam_safety section), the instruction is one a policy takes."""
    from .instruction import check_instruction
    from .paths import config_file, models_dir, preset_file

    preset = values.get("preset", "")
    if preset and not preset_file(preset).is_file():
        shipped = sorted(p.stem for p in models_dir().glob("*.yaml"))
        near = difflib.get_close_matches(preset, shipped, n=1)
        raise LaunchArgumentError(f"argument preset:={preset!r} is not a preset" + (f" (did you mean {near[0]!r}?)"
                                  if near else "") + f"; the shipped ones: {shipped}, or the path of a model YAML")
    if values.get("params_file"):
        _yaml_mapping("params_file", Path(values["params_file"]))
    if values.get("safety_config"):
        _yaml_mapping("safety_config", Path(values["safety_config"]))
        import yaml

        if not isinstance(yaml.safe_load(Path(values["safety_config"]).read_text()).get("yam_safety"), dict):
            raise LaunchArgumentError(f"argument safety_config:={values['safety_config']!r} has no yam_safety "
                                      f"section (config/yam_safety.yaml's layout)")
    cameras = any(n.executable == "camera_bridge" and starts(n, values) for n in NODES[launch])
    if "camera_config" in values and cameras:
        _yaml_mapping("camera_config", config_file(values["camera_config"], "cameras.yaml"))
    if values.get("instruction"):
        try:
            check_instruction(values["instruction"])
        except ValueError as e:
            raise LaunchArgumentError(f"argument instruction:=...: {e}") from None


def _check_bus(values: Mapping[str, str], given: Mapping[str, str]) -> None:
    """bus, driver_config and use_emulated_driver agree, and the driver file exists and names that bus."""
    bus = values["bus"]
    if values.get("sim") == "mujoco":
        mixed = [f"{k}:={given[k]!r}" for k in ("bus", "driver_config", "use_emulated_driver") if k in given]
        if mixed:
            raise LaunchArgumentError(f"argument {mixed[0]} is for the hardware driver (sim:=none); the simulated arm "
                                      f"(sim:=mujoco) runs its own (config/yam_mujoco.yaml driver_config)")
        return
    flag = typed("flag", values["use_emulated_driver"], "use_emulated_driver")
    if bus == "emulated" and "use_emulated_driver" in given and not flag:
        raise LaunchArgumentError("argument bus:='emulated' emulates the motors; use_emulated_driver:="
                                  f"{given['use_emulated_driver']!r} says not to: drop one")
    path = values["driver_config"]
    if not path:
        return
    file = Path(path)
    if not file.is_file():
        raise LaunchArgumentError(f"argument driver_config:={path!r} is not a file")
    import yaml

    try:
        said = (yaml.safe_load(file.read_text()) or {}).get("yam_driver", {}).get("bus")
    except (yaml.YAMLError, AttributeError) as e:
        raise LaunchArgumentError(f"argument driver_config:={path!r} is not a driver YAML (section yam_driver): "
                                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if said is None:
        raise LaunchArgumentError(f"argument driver_config:={path!r} has no yam_driver section with a bus")
    if bus != "emulated" and said != bus:
        raise LaunchArgumentError(f"argument driver_config:={path!r} is a {said!r} driver file but bus:={bus!r}: "
                                  f"give bus:={said} (or another file)")


def _driver_bus(bus: str) -> str:
    """The driver's `bus` parameter for the bus argument: emulated motors are the YAM's (Damiao)."""
    return "damiao" if bus == "emulated" else bus


def typed(kind: str, value: str, what: str = "value", values: Mapping[str, str] | None = None):
    """The launch argument's text as the parameter type launch_ros gives it (`values`: every
    resolved argument, for the kinds that read the bus argument too; without them its default)."""
    bus = (values or {}).get("bus", "damiao")
    if kind == "text":
        return str(value)
    if kind == "bus":
        return _driver_bus(str(value))
    if kind == "emulated":
        return typed("flag", value, what) or bus == "emulated"
    if kind == "integer":
        try:
            return int(str(value).strip())
        except ValueError:
            raise LaunchArgumentError(f"argument {what} must be an integer, got {value!r}") from None
    if kind == "sim_time":
        return str(value) == "mujoco"
    if kind == "flag":
        key = str(value).strip().lower()
        if key not in BOOLEANS:
            raise LaunchArgumentError(f"argument {what} must be one of {sorted(BOOLEANS)}, got {value!r}")
        return BOOLEANS[key]
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def starts(node: LaunchedNode, values: Mapping[str, str]) -> bool:
    """Whether the launch condition of `node` holds for the resolved argument `values`."""
    if node.when == "":
        return True
    mujoco = values.get("sim", "none") == "mujoco"
    if node.when == "leader":
        return not mujoco and values.get("teleop") == "leader"
    return mujoco if node.when == "mujoco" else not mujoco


@dataclass(frozen=True)
class Process:
    """One process as launch_ros would start it (the parameter dict not yet written to a file)."""

    executable: str
    name: str | None
    params_file: str                 # the launch's params_file (resolved to a path)
    overrides: dict                  # typed parameters from arguments, launch_ros' dict parameters

    def argv(self, overrides_file: str | Path | None) -> list[str]:
        """The command line: executable, then the ROS arguments launch_ros gives it."""
        ros = ["--ros-args"]
        if self.name is not None:
            ros += ["-r", f"__node:={self.name}"]
        ros += ["--params-file", self.params_file]
        if overrides_file is not None:
            ros += ["--params-file", str(overrides_file)]
        return [self.executable, *ros]

    def overrides_yaml(self) -> str:
        """The overrides as launch_ros writes a parameter dict: for every node of the process."""
        import yaml

        return yaml.safe_dump({"/**": {"ros__parameters": dict(self.overrides)}}, default_flow_style=False)


def processes(launch: str, given: Mapping[str, str] | None = None) -> list[Process]:
    """The vam_stack processes `launch` starts with arguments `given` (rviz2/rqt are not ours:
    they are left out), in the launch file's order."""
    values = resolve(launch, given or {})
    params_file = values["params_file"]
    if not params_file:
        from vam_stack.paths import config_dir

        params_file = str(config_dir() / PARAMS_FILES[launch])
    elif not Path(params_file).is_file():
        raise LaunchArgumentError(f"argument params_file:={params_file!r} is not a file")
    out = []
    for node in NODES[launch]:
        if starts(node, values):
            overrides = {p: typed(kind, values[arg], values=values) for p, (arg, kind) in node.parameters.items()}
            out.append(Process(node.executable, node.name, params_file, overrides))
    return out


# --- launch_ros side (imported only by the launch files) ----------------------------------------

def declare(launch: str) -> list:
    """DeclareLaunchArgument actions for every argument of `launch` (params_file's empty default
    becomes the shipped file's path in the package share)."""
    from launch.actions import DeclareLaunchArgument
    from launch.substitutions import PathJoinSubstitution
    from launch_ros.substitutions import FindPackageShare

    out = []
    for name, (default, text_) in arguments(launch).items():
        if name == "params_file":
            default = PathJoinSubstitution([FindPackageShare("vam_stack"), "config", PARAMS_FILES[launch]])
        out.append(DeclareLaunchArgument(name, default_value=default, description=text_,
                                         **({"choices": list(CHOICES[name])} if name in CHOICES else {})))
    return out


def check_action(launch: str) -> list:
    """The argument check of `resolve`, as the launch file's first action: under `ros2 launch` a refused
    argument ends the launch with the reason before any process starts (launch runs its actions in order;
    an OpaqueFunction that raises stops it there)."""
    from launch.actions import OpaqueFunction

    def check(context):
        # launch's configurations hold every declared argument, the defaults too: only the ones the launch
        # line set are `given` (a default bus:=damiao is not an argument "for the hardware" under sim:=mujoco)
        declared = arguments(launch)
        given = {name: value for name, (default, _) in declared.items()
                 if (value := context.launch_configurations.get(name, default)) != default}
        resolve(launch, given)
        return []

    return [OpaqueFunction(function=check)]


def node_actions(launch: str) -> list:
    """launch_ros Node actions for every row of NODES[launch]: the params file, then the
    argument-typed parameters, under the row's condition."""
    from launch.conditions import IfCondition, UnlessCondition
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    out = []
    for node in nodes(launch):
        params = {p: _typed_substitution(arg, kind) for p, (arg, kind) in node.parameters.items()}
        condition = {"": None, "mujoco": IfCondition(is_mujoco()), "hardware": UnlessCondition(is_mujoco()),
                     "leader": IfCondition(is_leader())}[node.when]
        kwargs = {"name": node.name} if node.name is not None else {}
        out.append(Node(package="vam_stack", executable=node.executable, output="screen",
                        parameters=[LaunchConfiguration("params_file"), *([params] if params else [])],
                        condition=condition, **kwargs))
    return out


def gui_actions(launch: str) -> list:
    """rviz2 / rqt as the use_rviz / use_rqt arguments ask, decided at launch time by `gui_plan`:
    a viewer whose package is not installed is logged and left out (never a failed launch)."""
    from launch.actions import LogInfo, OpaqueFunction
    from launch_ros.actions import Node

    def decide(context):
        values = {flag: context.launch_configurations.get(flag, "false") for flag in GUI
                  if flag in arguments(launch)}
        actions = []
        for flag, start, message in gui_plan(values):
            actions.append(LogInfo(msg=message))
            if start:
                from ament_index_python.packages import get_package_share_directory

                package, executable, name, option, layout = GUI[flag]
                layout_path = str(Path(get_package_share_directory("vam_stack")) / "config" / layout)
                actions.append(Node(package=package, executable=executable, name=name, output="screen",
                                    arguments=[option, layout_path]))
        return actions

    return [OpaqueFunction(function=decide)]


def is_mujoco():
    """A condition substitution: true when sim:=mujoco."""
    from launch.substitutions import LaunchConfiguration, PythonExpression

    return PythonExpression(["'", LaunchConfiguration("sim"), "' == 'mujoco'"])


def is_leader():
    """A condition substitution: true when sim:=none and teleop:=leader."""
    from launch.substitutions import LaunchConfiguration, PythonExpression

    return PythonExpression(["'", LaunchConfiguration("sim"), "' != 'mujoco' and '", LaunchConfiguration("teleop"),
                             "' == 'leader'"])


def _typed_substitution(name: str, kind: str):
    """The argument as a typed node parameter. A flag takes what launch's conditions take on
    Humble and Jazzy (BOOLEANS); a parameter typed bool alone would refuse 1/0 on Humble."""
    from launch.substitutions import LaunchConfiguration, PythonExpression
    from launch_ros.descriptions import ParameterValue

    if kind == "flag":
        expression = [repr(BOOLEANS), "['", LaunchConfiguration(name), "'.strip().lower()]"]
        return ParameterValue(PythonExpression(expression), value_type=bool)
    if kind == "sim_time":
        return ParameterValue(PythonExpression(["'", LaunchConfiguration(name), "' == 'mujoco'"]), value_type=bool)
    bus = ["('damiao' if '", LaunchConfiguration("bus"), "' == 'emulated' else '", LaunchConfiguration("bus"), "')"]
    if kind == "bus":
        return ParameterValue(PythonExpression(bus), value_type=str)
    if kind == "emulated":
        expression = [repr(BOOLEANS), "['", LaunchConfiguration(name), "'.strip().lower()] or '",
                      LaunchConfiguration("bus"), "' == 'emulated'"]
        return ParameterValue(PythonExpression(expression), value_type=bool)
    return ParameterValue(LaunchConfiguration(name), value_type={"text": str, "integer": int}[kind])
