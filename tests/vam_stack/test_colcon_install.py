"""A real `colcon build` (colcon from PyPI) of the package into an isolated install, then the CLI
and every node's entry point started from that install, outside the source tree, with the
workspace sourced the way a ROS user does (`. install/setup.sh`), on real rclpy."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def _colcon() -> list[str] | None:
    exe = Path(sys.executable).with_name("colcon")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("colcon")
    return [found] if found else None


def _source_files() -> list[str]:
    if (ROOT / ".git").exists() and shutil.which("git"):
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [f for f in out.splitlines() if (ROOT / f).is_file()]
    skip = {".venv", "runs", "build", "install", "log", ".git"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and not (set(p.relative_to(ROOT).parts) & skip)]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    colcon = _colcon()
    if colcon is None:
        pytest.skip("colcon is not installed (pip install colcon-core colcon-ros colcon-python-setup-py)")
    ws = tmp_path_factory.mktemp("ws")
    src = ws / "src" / "vam_stack"
    for f in _source_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH", "PYTHONPATH")}
    r = subprocess.run(colcon + ["build", "--base-paths", "src"], cwd=ws, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (ws / "install" / "vam_stack" / "share" / "vam_stack" / "models").is_dir()   # the isolated layout
    return ws, env


def _run(ws: Path, env: dict, command: str, cwd: Path) -> subprocess.CompletedProcess:
    """`command` in bash after sourcing the workspace, like a user's shell."""
    return subprocess.run(["bash", "-c", f". {ws}/install/setup.sh && {command}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_runs_from_the_isolated_install(workspace, tmp_path):
    ws, env = workspace
    r = _run(ws, env, f"{ws}/install/vam_stack/lib/vam_stack/vam-stack model-info --preset libero64 --json", tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"name": "libero64"' in r.stdout or '"preset": "libero64"' in r.stdout
    probe = ("import vam_stack.paths as p; print(p.__file__); print(p.share_dir()); "
             "from vam_model.networks.checkpoint import verify_checkpoint; "
             "verify_checkpoint(p.models_dir() / 'libero64.safetensors')")
    r = _run(ws, env, f"{sys.executable} -c \"{probe}\"", tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    module, share = r.stdout.split()[:2]
    assert module.startswith(str(ws / "install")) and share == str(ws / "install" / "vam_stack" / "share" / "vam_stack")


NODE_PROBE = r"""
import sys
import rclpy
from rclpy.parameter import Parameter
from camera_bridge.node import CameraBridgeNode
from vam_sim.libero_mock.node import LiberoBridgeNode
from tr_monitor_node.node import TRMonitorNode
from vam_policy_node.node import VamPolicyNode
from yam_driver.node import YamDriverNode
import vam_stack.paths as paths
assert paths.__file__.startswith(sys.argv[1]), paths.__file__
rclpy.init()
made = [YamDriverNode(parameter_overrides=[Parameter("use_emulator", value=True)]),
        CameraBridgeNode(parameter_overrides=[Parameter("config_file", value="cameras_synthetic.yaml")]),
        TRMonitorNode(), LiberoBridgeNode(),
        VamPolicyNode(parameter_overrides=[Parameter("preset", value="libero64")])]
for n in made:
    print(n.get_name())
    n.destroy_node()
from vam_sim.yam_mujoco.node import build_nodes
for n in reversed(build_nodes([])):     # the simulated arm: the world, then camera_bridge and yam_driver on it
    print(n.get_name())
    n.destroy_node()
rclpy.try_shutdown()
"""


def test_every_node_starts_from_the_install(workspace, tmp_path):
    ws, env = workspace
    script = tmp_path / "probe.py"
    script.write_text(NODE_PROBE)
    r = _run(ws, env, f"{sys.executable} {script} {ws / 'install'}", tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.split() == ["yam_driver", "camera_bridge", "tr_monitor_node", "libero_bridge", "vam_policy_node",
                                "yam_driver", "camera_bridge", "yam_mujoco_sim"]
    for exe in ("vam_policy_node", "yam_driver", "camera_bridge", "tr_monitor_node", "libero_bridge", "yam_mujoco_sim",
                "demo_recorder", "yam_leader"):
        assert (ws / "install" / "vam_stack" / "lib" / "vam_stack" / exe).is_file(), f"no entry point {exe}"
