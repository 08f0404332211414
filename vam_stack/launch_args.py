"""The launch arguments of robot.launch.py and sim.launch.py: one table, and the helpers that
turn an argument into a typed node parameter.

`arguments(launch)` gives the name -> (default, description) table of one launch file; the
launch files declare exactly those (`declare(launch)`). `text`, `flag` and `integer` wrap an
argument as a node parameter of that type. `launch` and `launch_ros` are imported only by those
helpers, so the table itself reads (and is tested) without ROS.
"""
from __future__ import annotations

LAUNCH_FILES = ("robot", "sim")

# name: (description, {launch file: default}); "" config paths = the shipped config/ files
TABLE: dict[str, tuple[str, dict[str, str]]] = {
    "camera_config": ("camera bridge YAML; empty = config/cameras.yaml", {"robot": ""}),
    "preset": ("model preset used when no checkpoint is given", {"robot": "real", "sim": "libero64"}),
    "checkpoint": ("policy checkpoint (safetensors); empty = models/<preset>.safetensors if shipped",
                   {"robot": "", "sim": ""}),
    "guidance": ("guidance schedule: none | flat | tr_adaptive", {"robot": "tr_adaptive", "sim": "tr_adaptive"}),
    "backend": ("runtime of the DiT calls: torch | onnxruntime | tensorrt", {"robot": "torch", "sim": "torch"}),
    "device": ("where the policy runs: auto (CUDA when present) | cpu | cuda | cuda:N", {"robot": "auto", "sim": "auto"}),
    "instruction": ("start an episode with this instruction once inputs arrive", {"robot": ""}),
    "use_emulated_driver": ("drive emulated motors instead of the arm", {"robot": "false"}),
    "suite": ("LIBERO suite (spatial, object, goal, long and the _ood variants)", {"sim": "goal"}),
    "task": ("task of the first episode (0-9)", {"sim": "0"}),
    "episodes": ("episodes to run", {"sim": "10"}),
    "sim": ("the arm: none = the hardware (or emulated motors); mujoco = the simulated YAM (yam_mujoco_sim: "
            "MuJoCo world, camera bridge and driver in one process)", {"robot": "none"}),
    "sim_task": ("MuJoCo task with sim:=mujoco: handover | relay | tray_lift", {"robot": "handover"}),
    "use_rviz": ("start rviz2 with config/vam_stack.rviz", {"robot": "true", "sim": "false"}),
    "use_rqt": ("start rqt with config/vam_stack.perspective", {"robot": "false", "sim": "false"}),
}


# arguments with a closed set of values: launch refuses anything else before a node starts
CHOICES: dict[str, tuple[str, ...]] = {
    "guidance": ("none", "flat", "tr_adaptive"),
    "backend": ("torch", "onnxruntime", "tensorrt"),
    "sim": ("none", "mujoco"),
    "sim_task": ("handover", "relay", "tray_lift"),
}


def arguments(launch: str) -> dict[str, tuple[str, str]]:
    """name -> (default, description) of the arguments launch file `launch` declares."""
    if launch not in LAUNCH_FILES:
        raise ValueError(f"launch must be one of {LAUNCH_FILES}, got {launch!r}")
    return {name: (defaults[launch], text_) for name, (text_, defaults) in TABLE.items() if launch in defaults}


def declare(launch: str) -> list:
    """DeclareLaunchArgument actions for every argument of `launch`."""
    from launch.actions import DeclareLaunchArgument

    return [DeclareLaunchArgument(n, default_value=d, description=t, **({"choices": list(CHOICES[n])} if n in CHOICES else {}))
            for n, (d, t) in arguments(launch).items()]


def is_mujoco():
    """A condition substitution: true when sim:=mujoco."""
    from launch.substitutions import LaunchConfiguration, PythonExpression

    return PythonExpression(["'", LaunchConfiguration("sim"), "' == 'mujoco'"])


def text(name: str):
    """The argument as a string parameter ("" stays a string, not an empty YAML value)."""
    return _typed(name, str)


def integer(name: str):
    return _typed(name, int)


def _typed(name: str, value_type: type):
    from launch.substitutions import LaunchConfiguration
    from launch_ros.descriptions import ParameterValue

    return ParameterValue(LaunchConfiguration(name), value_type=value_type)


def flag(name: str):
    """A bool argument as a bool parameter. It takes what launch's conditions take on Humble and
    Jazzy (true/false/1/0, any case); a parameter typed bool alone would refuse 1/0 on Humble,
    and anything else fails the launch."""
    from launch.substitutions import LaunchConfiguration, PythonExpression
    from launch_ros.descriptions import ParameterValue

    return ParameterValue(PythonExpression(["{'true': True, '1': True, 'false': False, '0': False}['",
                                            LaunchConfiguration(name), "'.strip().lower()]"]), value_type=bool)
