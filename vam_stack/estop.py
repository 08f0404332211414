"""The operator's e-stop that always lands: a service on the node that moves the arm, echoed latched.

    ros2 service call /vam/estop std_srvs/srv/SetBool "{data: true}"     # hold (false: release)

`/vam/estop` (std_srvs/SetBool) is served by the node that moves the arm in each graph: `yam_driver`
(robot, record, and `sim:=mujoco`, where the simulator's driver node serves it) and `libero_bridge`
(the mocked LIBERO graph). `ros2 service call` waits until the service exists, and the answer comes
from that node after it has latched (or released) its hold: `success=True` and what the arm now does.
A topic publish cannot promise that: `ros2 topic pub --once` sends as soon as one subscription
matches (4 of 6 e-stops reached only the monitor or only the policy in issue 67), and
`-w 2` waits forever on a graph with one subscriber.

The serving node then publishes the new state on `/vam/estop_state` with a latched writer (reliable,
transient local), which the policy node reads transient-local: it stops its episode, and a policy
node that joins later (restarted) is told the e-stop is on. (A separate topic: a transient-local
reader on `/vam/estop` itself would make an operator's plain, volatile `ros2 topic pub /vam/estop`
warn about incompatible QoS at every publish.) That plain topic publish still works as before,
without the guarantee.

Plain wiring over `vam_stack.ros` (no control logic): `latch(on) -> str` is the node's own hold or
release, returning what the operator is told.
"""
from __future__ import annotations

from typing import Any, Callable

SERVICE = "/vam/estop"
SERVICE_TYPE = "std_srvs/srv/SetBool"
COMMAND = 'ros2 service call /vam/estop std_srvs/srv/SetBool "{data: true}"'
RELEASE = 'ros2 service call /vam/estop std_srvs/srv/SetBool "{data: false}"'


class EstopService:
    """`/vam/estop` served on `node`: latch (or release) with `latch(on)`, answer, echo latched."""

    def __init__(self, node: Any, latch: Callable[[bool], str]):
        from std_msgs.msg import Bool
        from std_srvs.srv import SetBool

        from vam_stack import refusals, ros

        self._latch, self._bool = latch, Bool
        self.calls = 0
        self.pub = ros.publisher(node, "estop_state")    # the topic table's latched writer (transient local)
        self.service = refusals.service(node, SetBool, SERVICE, self._on_call)

    def _on_call(self, request, response):
        on = bool(request.data)
        response.message = self._latch(on)
        response.success = True
        self.calls += 1
        self.pub.publish(self._bool(data=on))
        return response
