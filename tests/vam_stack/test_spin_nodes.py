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
