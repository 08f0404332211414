"""`vam_stack.ros.spin_nodes` (several nodes in one process, e.g. yam_mujoco_sim): the nodes built
before a failure are destroyed in reverse order, and rclpy is shut down, on every exit path."""
from __future__ import annotations

import pytest
import rclpy

from vam_stack import ros

pytestmark = pytest.mark.adapter


class Built:
    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def destroy_node(self) -> None:
        self.log.append(self.name)


@pytest.mark.parametrize("error", [RuntimeError("camera did not open"), KeyboardInterrupt()])
def test_nodes_built_before_a_failure_are_destroyed_in_reverse(error):
    destroyed: list = []

    def factory(nodes: list) -> None:
        nodes.append(Built("world", destroyed))
        nodes.append(Built("camera_bridge", destroyed))
        raise error

    if isinstance(error, KeyboardInterrupt):
        ros.spin_nodes(factory, [])                       # Ctrl-C while starting: a clean exit
    else:
        with pytest.raises(RuntimeError, match="camera did not open"):
            ros.spin_nodes(factory, [])
    assert destroyed == ["camera_bridge", "world"]
    assert not rclpy.ok()


SAFE_STOP_PROBE = r"""
import sys
from rclpy.node import Node
from std_msgs.msg import String
from vam_stack import ros

class Probe(Node):
    def __init__(self):
        super().__init__("probe")
        self.pub = self.create_publisher(String, "/probe", 10)
        self.create_timer(0.05, lambda: None)
        print("spinning", flush=True)

    def destroy_node(self):
        # what a hardware node does on exit: drive to a safe state and say so on its topics
        self.pub.publish(String(data="held"))
        print(f"context ok at destroy: {self.context.ok()}", flush=True)
        super().destroy_node()

ros.spin_node(Probe, sys.argv[1:])
print("exited", flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_spin_and_nodes_are_destroyed_while_the_context_is_valid(tmp_path, sig):
    """launch sends SIGINT, then SIGTERM: either ends the spin, and each node's destroy_node (its
    safe state, its last publish) runs before rclpy shuts down (rclpy's own handlers shut the
    context down first, and a last publish then fails)."""
    import os
    import signal
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(SAFE_STOP_PROBE)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ))
    assert p.stdout.readline().strip() == "spinning"
    p.send_signal(getattr(signal, sig))
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 0, out
    assert "context ok at destroy: True" in out and "exited" in out, out
    assert "Traceback" not in out and "Failed to publish" not in out, out
