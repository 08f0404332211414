"""The development ament prefix (vam_stack.dev_prefix): what ros2 launch and launch_ros look up in it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vam_stack.dev_prefix import CHECKOUT, console_scripts, make_prefix

pytestmark = pytest.mark.unit


def test_the_prefix_holds_the_index_marker_the_share_files_and_every_executable(tmp_path):
    out = make_prefix(tmp_path / "p")
    assert (out / "share/ament_index/resource_index/packages/vam_stack").is_file()
    launch = out / "share/vam_stack/launch"
    assert launch.is_dir() and not launch.is_symlink()      # ros2 launch's search does not follow a linked folder
    assert (launch / "robot.launch.py").resolve() == CHECKOUT / "launch/robot.launch.py"
    assert (out / "share/vam_stack/package.xml").resolve() == CHECKOUT / "package.xml"
    assert (out / "share/vam_stack/models/yam64.safetensors").exists()
    scripts = console_scripts()
    assert {"vam_policy_node", "yam_driver", "camera_bridge", "tr_monitor_node"} <= set(scripts)
    for exe in scripts:
        assert os.access(out / "lib/vam_stack" / exe, os.X_OK), exe
        # the policy node's child process (multiprocessing spawn) runs the main file again: guarded
        assert "if __name__ == '__main__':" in (out / "lib/vam_stack" / exe).read_text()
    make_prefix(out)                                          # refreshed in place
    env = {**os.environ, "PYTHONPATH": ""}
    r = subprocess.run([str(out / "lib/vam_stack/vam-stack"), "--help"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and "sim" in r.stdout, r.stderr[-2000:]


def test_the_command_prints_the_export_line_and_refuses_bad_usage(tmp_path):
    r = subprocess.run([sys.executable, "-m", "vam_stack.dev_prefix", str(tmp_path / "q")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"export AMENT_PREFIX_PATH={tmp_path / 'q'}:${{AMENT_PREFIX_PATH}}"
    assert subprocess.run([sys.executable, "-m", "vam_stack.dev_prefix"], capture_output=True, timeout=60).returncode == 2
