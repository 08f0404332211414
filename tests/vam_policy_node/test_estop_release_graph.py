"""Issue 71 row 2 on the graph: `robot.launch.py preset:=tiny_real camera_config:=cameras_synthetic.yaml
use_emulated_driver:=true`, every node its own process as launch starts it, operated from this process
as `ros2 topic pub` would. An instruction waits its turn in the policy node while the e-stop is
latched and released (the node starts an episode at most every 0.5 s: the second of two instructions
sent 50 ms apart waits): nothing may move until an instruction arrives after the release. Before the
fix the waiting instruction started at the release (the issue's probe: 365 targets in the 15 s after
it). An instruction sent after the release starts. (The start queued behind the e-stop's stop, the
other way an instruction outlived the e-stop, is tests/fault_campaign/test_estop_forgets_rows.py.)"""
from __future__ import annotations

import pytest
from std_msgs.msg import Bool, String

from vam_stack.process_graph import ProcessGraph

pytestmark = [pytest.mark.adapter, pytest.mark.slow]


def test_an_instruction_that_arrived_during_the_estop_does_not_start_at_the_release(ros_harness, tmp_path):
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    h = ros_harness
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)            # Jazzy's `ros2 topic pub`
    out = {k: h.capture(k) for k in ("joint_states", "joint_targets", "telemetry", "diagnostics")}
    graph = ProcessGraph("robot", {"preset": "tiny_real", "camera_config": "cameras_synthetic.yaml",
                                   "use_emulated_driver": "true"}, log_dir=tmp_path / "logs")
    instruction = h.node.create_publisher(String, "/vam/instruction", qos)
    estop = h.node.create_publisher(Bool, "/vam/estop", qos)

    def policy_said(text: str) -> bool:
        return any(text in m for n, m, _ in h.log_stamps if n.endswith("vam_policy_node"))

    with graph:
        assert h.spin_until(lambda: len(out["joint_states"]) > 10 and instruction.get_subscription_count() >= 2
                            and estop.get_subscription_count() >= 2, timeout=180), graph.exited()
        # the policy node spins (its diagnostics) only once it has loaded and warmed up its policy
        assert h.spin_until(lambda: any(st.name.startswith("vam_policy_node") for m in out["diagnostics"]
                                        for st in m.status), timeout=300), graph.exited()
        h.spin_for(2.0)                               # frames and joint states reach the policy node
        # B right behind A waits its turn in the node's mailbox (an episode starts at most every 0.5 s);
        # the e-stop is latched and released while it waits
        instruction.publish(String(data="fold the towel"))
        h.spin_for(0.05)
        instruction.publish(String(data="put the bowl on the plate"))
        h.spin_for(0.05)
        estop.publish(Bool(data=True))
        assert h.spin_until(lambda: policy_said("e-stop: holding"), timeout=5)
        estop.publish(Bool(data=False))
        assert h.spin_until(lambda: policy_said("e-stop released"), timeout=5)
        n = len(out["joint_targets"])
        h.spin_for(15.0)
        after = len(out["joint_targets"]) - n
        assert after < 5, (f"{after} targets in the 15 s after the release with no instruction sent after it; "
                           f"policy log: {graph.log('vam_policy_node')[-2000:]}")
        assert not policy_said("episode started: 'put the bowl on the plate'")
        instruction.publish(String(data="put the bowl on the plate"))      # sent after the release: it starts
        assert h.spin_until(lambda: len(out["joint_targets"]) - n > 30, timeout=120)
        codes = graph.stop()
    assert codes == {label: 0 for label in codes}, codes
