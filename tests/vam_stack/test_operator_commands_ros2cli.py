"""The operator commands README.md and docs/deployment.md show (`ros2 param set`, `ros2 topic pub`,
`ros2 service call`, `ros2 lifecycle set`), read from the docs and run verbatim with the real
`ros2` CLI against the robot graph on the emulated arm (the launch file's processes, started as
launch starts them: vam_stack.process_graph). Each must exit 0 and do what the docs say.

The ROS part is skipped where ros2cli is not importable or `ros2` is not on PATH (the package
index carries rclpy, not ros2cli: source a ROS 2 install); the list of commands is checked
everywhere, so a doc edit that drops or mangles one fails here.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERBS = r"ros2 (?:param set|topic pub|service call|lifecycle set)"
# lifecycle templates (`configure|activate|...`): the transitions safe on a running graph, in order
LIFECYCLE_SAFE = ("deactivate", "activate")


def doc_commands() -> list[str]:
    """Every complete operator command in the docs (inline code or a code block), in order, once;
    a `a|b|c` transition list becomes the safe transitions; comments dropped."""
    out: list[str] = []
    for doc in ("README.md", "docs/deployment.md"):
        text = (ROOT / doc).read_text()
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
        inline = re.sub(r"```.*?```", "", text, flags=re.S)          # (a fence would pair the inline backticks wrong)
        spans = re.findall(r"`([^`]+)`", inline) + [line for block in blocks for line in block.splitlines()]
        for span in spans:
            span = " ".join(span.split("#")[0].split())
            if not re.match(VERBS + r" \S+ \S+", span):
                continue
            words = span.split()
            if "|" in span and words[:3] == ["ros2", "lifecycle", "set"]:
                cmds = [" ".join(words[:4] + [t]) for t in LIFECYCLE_SAFE if t in words[4].split("|")]
            else:
                cmds = [span]
            out += [c for c in cmds if c not in out]
    # transitions run in the order a running graph takes them (deactivate before activate), wherever the
    # docs show each one (the fault reset shows `activate` alone, before the lifecycle list)
    lifecycle = [c for c in out if c.startswith("ros2 lifecycle set")]
    order = sorted(lifecycle, key=lambda c: (c.split()[3], LIFECYCLE_SAFE.index(c.split()[4])
                                             if c.split()[4] in LIFECYCLE_SAFE else len(LIFECYCLE_SAFE)))
    # the e-stop last, latched then released (home is refused while it is latched, as it must be)
    estop = sorted((c for c in out if "/vam/estop" in c), key=lambda c: "false" in c)
    return [c for c in out if c not in lifecycle and c not in estop] + order + estop


def test_the_docs_show_the_operator_commands():
    cmds = doc_commands()
    assert "ros2 param set /vam_policy_node w_plan_base 0.5" in cmds
    assert 'ros2 service call /vam/estop std_srvs/srv/SetBool "{data: true}"' in cmds   # answered by the driver
    assert 'ros2 service call /vam/estop std_srvs/srv/SetBool "{data: false}"' in cmds
    assert not [c for c in cmds if "topic pub" in c and "/vam/estop" in c]     # not the form that may miss it
    assert "ros2 service call /yam_driver/home std_srvs/srv/Trigger" in cmds
    assert ["ros2 lifecycle set /yam_driver deactivate", "ros2 lifecycle set /yam_driver activate"] == \
        [c for c in cmds if c.startswith("ros2 lifecycle set")]
    for c in cmds:
        shlex.split(c)                                    # each one a well-formed shell line


def _ros2_works() -> bool:
    """ros2cli importable here or a `ros2` command on PATH that answers (a sourced ROS 2 install)."""
    exe = shutil.which("ros2")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "--help"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_ROS2CLI = (importlib.util.find_spec("ros2cli") is not None and shutil.which("ros2") is not None) or _ros2_works()


@pytest.mark.adapter
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_ROS2CLI, reason="ros2cli / the `ros2` command is not installed (the package index has "
                                             "rclpy, not ros2cli): source a ROS 2 install to run the docs' commands")
def test_the_docs_operator_commands_work_verbatim_with_the_ros2_cli(ros_harness, tmp_path):
    from vam_stack.process_graph import ProcessGraph

    h = ros_harness
    states = h.capture("joint_states")
    graph = ProcessGraph("robot", {"preset": "tiny_real", "camera_config": "cameras_synthetic.yaml",
                                   "bus": "emulated"}, log_dir=tmp_path / "logs")
    with graph:
        assert h.spin_until(lambda: len(states) > 10, timeout=120), graph.exited()
        # the node's own readiness signal (its lifecycle state active), not a guess after /joint_states: with a
        # cold ONNX cache the policy node exports its graphs first (minutes on a loaded machine, issue 67 row 8)
        for node in ("yam_driver", "vam_policy_node"):
            assert h.wait_active(node, timeout=900), (node, graph.exited(), graph.log("vam_policy_node")[-3000:])
        for cmd in doc_commands():
            for _ in range(3):       # the CLI's graph cache (ros2 daemon) may not list a node yet: asked again
                done = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=90)
                if done.returncode == 0 or "not found" not in done.stderr.lower():
                    break
                time.sleep(2.0)
            assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
            if cmd.startswith("ros2 param set"):
                assert "Set parameter successful" in done.stdout, (cmd, done.stdout)
            if cmd.startswith("ros2 service call"):
                # the emulated arm on a loaded 2-core host can latch "no reply" faults (python-can's virtual bus
                # inside the driver's process): then home is refused, with that reason, which is what it must do
                emulator_lost = "no reply" in graph.log("yam_driver") and "driver is fault" in done.stdout
                assert "success=True" in done.stdout or emulator_lost, (cmd, done.stdout)
            if cmd.startswith("ros2 lifecycle set"):
                assert "Transitioning successful" in done.stdout, (cmd, done.stdout)
        bad = subprocess.run(shlex.split("ros2 param set /vam_policy_node w_plan_base 99.0"), capture_output=True,
                             text=True, timeout=60)
        assert "Setting parameter failed" in bad.stdout + bad.stderr, bad   # out of range: refused with the reason
        codes = graph.stop()
    assert codes == {k: 0 for k in codes}, codes
