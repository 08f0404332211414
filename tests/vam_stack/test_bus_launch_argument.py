"""robot.launch.py's bus:= and driver_config:= arguments: the one table (vam_stack/launch_args.py)
through `vam-stack ros-graph robot ... --dry-run`, its checks, and the launch_ros expressions
evaluated as launch would (launch_ros itself is not installed here: tests/vam_stack/test_ros_launch.py)."""
from __future__ import annotations

import sys
import types

import pytest
import yaml

from vam_cli.main import main
from vam_stack import launch_args
from vam_stack.paths import config_dir

pytestmark = pytest.mark.unit


def dry_run(capsys, *arguments: str) -> dict[str, str]:
    """executable -> its overrides line, from `vam-stack ros-graph robot ARGS --dry-run`."""
    assert main(["ros-graph", "robot", *arguments, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[0]: nxt.strip() for line, nxt in zip(lines, lines[1:] + [""]) if not line.startswith(" ")}


@pytest.mark.parametrize("bus, emulator, driver_bus", [
    ("damiao", False, "damiao"), ("dynamixel", False, "dynamixel"), ("emulated", True, "damiao")])
def test_the_bus_is_chosen_on_the_launch_line(capsys, bus, emulator, driver_bus):
    out = dry_run(capsys, f"bus:={bus}")
    assert out["yam_driver"] == (f"overrides: use_emulator={emulator}, bus='{driver_bus}', config_file='', "
                                 f"safety_config=''")
    # the policy node reads no driver file: its joint names are the robot description's
    assert "driver_config" not in out["vam_policy_node"]


def test_the_default_is_the_yams_damiao_bus_and_use_emulated_driver_still_works(capsys):
    assert launch_args.arguments("robot")["bus"][0] == "damiao"
    assert "use_emulator=False, bus='damiao'" in dry_run(capsys)["yam_driver"]
    assert "use_emulator=True, bus='damiao'" in dry_run(capsys, "use_emulated_driver:=true")["yam_driver"]
    assert "use_emulator=True, bus='dynamixel'" in dry_run(capsys, "bus:=dynamixel",
                                                           "use_emulated_driver:=1")["yam_driver"]


def test_a_driver_file_goes_to_the_driver_only(capsys, tmp_path):
    data = yaml.safe_load((config_dir() / "yam_driver_dynamixel.yaml").read_text())
    path = tmp_path / "my_driver.yaml"
    path.write_text(yaml.safe_dump(data))
    out = dry_run(capsys, "bus:=dynamixel", f"driver_config:={path}")
    assert f"config_file='{path}'" in out["yam_driver"] and str(path) not in out["vam_policy_node"]
    out = dry_run(capsys, "bus:=emulated", f"driver_config:={path}")     # emulated: that file's motors, emulated
    assert out["yam_driver"] == f"overrides: use_emulator=True, bus='damiao', config_file='{path}', safety_config=''"


@pytest.mark.parametrize("given, match", [
    ({"bus": "can"}, r"bus:='can' must be one of \['damiao', 'dynamixel', 'emulated'\]"),
    ({"bus": "Damiao"}, r"bus:='Damiao' must be one of"),
    ({"driver_config": "/nowhere/driver.yaml"}, r"driver_config:='/nowhere/driver.yaml' is not a file"),
    ({"driver_config": str(config_dir() / "yam_driver_dynamixel.yaml")},
     r"is a 'dynamixel' driver file but bus:='damiao': give bus:=dynamixel"),
    ({"driver_config": str(config_dir() / "yam_safety.yaml")}, r"has no yam_driver section with a bus"),
    ({"bus": "emulated", "use_emulated_driver": "false"}, r"bus:='emulated' emulates the motors; "
                                                          r"use_emulated_driver:='false' says not to"),
    ({"sim": "mujoco", "bus": "dynamixel"}, r"bus:='dynamixel' is for the hardware driver \(sim:=none\)"),
    ({"sim": "mujoco", "driver_config": "x.yaml"}, r"driver_config:='x.yaml' is for the hardware driver"),
    ({"buss": "emulated"}, r"did you mean 'bus'"),
    ({"safety_config": "/nowhere/safety.yaml"}, r"safety_config:='/nowhere/safety.yaml' is not a file"),
    ({"safety_config": str(config_dir() / "yam_driver_damiao.yaml")}, r"has no yam_safety section"),
])
def test_a_bad_bus_or_driver_file_is_refused_before_anything_starts(given, match):
    with pytest.raises(launch_args.LaunchArgumentError, match=match):
        launch_args.processes("robot", given)


def test_the_command_line_says_what_is_wrong_in_one_line(capsys):
    from vam_cli.main import entry

    assert entry(["ros-graph", "robot", "bus:=can", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vam-stack ros-graph: error: argument bus:='can' must be one of ['damiao', 'dynamixel', "
                   "'emulated']"]


@pytest.fixture
def fake_launch(monkeypatch):
    """launch's substitutions as launch evaluates them: LaunchConfiguration reads `values`,
    PythonExpression evaluates its joined parts, ParameterValue checks the type."""
    values: dict[str, str] = {}
    subs = types.ModuleType("launch.substitutions")
    subs.LaunchConfiguration = lambda name: values[name]

    def expression(parts):
        return eval("".join(parts))  # noqa: S307 (what launch's PythonExpression does)

    subs.PythonExpression = expression
    desc = types.ModuleType("launch_ros.descriptions")

    def parameter_value(value, value_type):
        assert type(value) is value_type, (value, value_type)
        return value

    desc.ParameterValue = parameter_value
    for name, module in {"launch": types.ModuleType("launch"), "launch.substitutions": subs,
                         "launch_ros": types.ModuleType("launch_ros"), "launch_ros.descriptions": desc}.items():
        monkeypatch.setitem(sys.modules, name, module)
    return values


@pytest.mark.parametrize("given", [{}, {"bus": "emulated"}, {"bus": "dynamixel"},
                                   {"bus": "dynamixel", "use_emulated_driver": " True "},
                                   {"bus": "damiao", "driver_config": str(config_dir() / "yam_driver_damiao.yaml")}])
def test_launch_ros_gets_the_same_parameters_as_the_process_table(fake_launch, given):
    values = launch_args.resolve("robot", given)
    fake_launch.update(values)
    for node in launch_args.nodes("robot"):
        for param, (arg, kind) in node.parameters.items():
            want = launch_args.typed(kind, values[arg], values=values)
            assert launch_args._typed_substitution(arg, kind) == want, (node.executable, param)


def test_one_safety_file_reaches_the_policys_filter_and_the_drivers_check(capsys, tmp_path):
    # issue 69 (noticed): the policy node and the driver each took their own safety_config, so a policy given
    # another file went unchecked by the driver's layer check; one launch argument now gives both the same file
    path = tmp_path / "safety.yaml"
    path.write_text((config_dir() / "yam_safety.yaml").read_text())
    for extra in ((), ("sim:=mujoco", "preset:=yam64")):
        out = dry_run(capsys, f"safety_config:={path}", *extra)
        takers = {exe for exe, line in out.items() if f"safety_config='{path}'" in line}
        assert takers == ({"vam_policy_node", "yam_driver"} if not extra else {"vam_policy_node", "yam_mujoco_sim"})
