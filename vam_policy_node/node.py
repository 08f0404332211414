"""vam_policy_node: the VAM policy, its chunk executor and the safety filter behind ROS 2 topics:
parameters (`params`) and wiring; what it holds is plain Python (`core.PolicyCore`, over
`vam_control.build.build_runtime`).

In: the stacked frame (raw or JPEG; the newest is the observation), /joint_states (by name),
/vam/instruction (a burst coalesced: `instructions`), /vam/estop (true latches a hold and stops the
policy, false releases it: nothing moves until an instruction or a start arrives after the release;
one waiting or queued before it is forgotten), ~/start_episode and ~/reset
(`services`). Out: /vam/joint_targets at the control rate, /vam/telemetry, /vam/attention,
/diagnostics. Callbacks only store inputs and queue commands. No message or service call ends the
node (refusals: `vam_stack.refusals`, `refusals.guarded`, `ros.SafeLifecycle`); a process that ends
anyway stops the policy, and the driver holds the arm (its watchdog), torque on.
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("vam_policy_node")   # before the heavy imports below

import threading

from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.task import Future
from std_srvs.srv import Trigger

from vam_control.runtime import RuntimeConfig
from vam_policy_node.core import PolicyCore, telemetry_messages
from vam_policy_node.params import OUTPUTS, PARAMS, policy_from_params, tune_live
from vam_policy_node.services import episode_services
from vam_policy_node.startup import run_autostart, say_configure_failed
from vam_stack import image_msgs, msgs, refusals, ros
from vam_stack.arrivals import ArrivalStats
from vam_stack.latency import FLUSH_PERIOD_S, LatencyTrace, stamp_key


class VamPolicyNode(ros.SafeLifecycle, LifecycleNode):
    """Managed: configure = build the policy, its runtime, warm up; activate = take instructions (start
    `instruction` if set); deactivate = stop the episode (the arm holds); cleanup = release the policy."""

    STOP_BUDGET_S = 1.0   # the stop's budget, well inside launch's SIGTERM 5 s after SIGINT (then SIGKILL)

    def __init__(self, policy=None, **node_kwargs):
        super().__init__("vam_policy_node", **node_kwargs)
        self._injected = policy               # a policy made elsewhere (tests); None: the parameters build it
        self.core = PolicyCore()
        self._error = None                    # why configure failed, for autostart's error
        p = self._params = ros.declare(self, PARAMS)
        self.pub = {key: ros.publisher(self, key) for key in ("joint_targets", "telemetry", "attention", "diagnostics")}
        self._publish_lock = threading.Lock()
        self._closing = False
        self.frames_in = ArrivalStats(p["camera_rate_hz"])   # capture -> policy latency, gaps (diagnostics)
        self.latency = LatencyTrace("vam_policy_node")     # per-frame stage stamps for `bench ros` (debug topic)
        self._refused = {"camera frame": refusals.refusal_log(self, "camera frame"),
                         "joint state": refusals.refusal_log(self, "joint state"),
                         "instruction": refusals.refusal_log(self, "instruction", "warning")}
        self._replacing = refusals.refusal_log(self, "new instruction", "info", verb="accepted")
        self._compressed = p["image_transport"] == "compressed"
        ros.subscription(self, "stacked_image_compressed" if self._compressed else "stacked_image", self._on_image)
        ros.subscription(self, "joint_states", self._on_state)
        ros.subscription(self, "instruction", self._on_instruction)
        estop_group = MutuallyExclusiveCallbackGroup()    # the e-stop in its own group: never behind another's
        ros.subscription(self, "estop", self._on_estop, estop_group)
        # and the e-stop service's latched state (vam_stack/estop.py), replayed to this node when it joins late
        ros.latched_subscription(self, "estop_state", self._on_estop, estop_group)
        services = episode_services(self.core.active_runtime, RuntimeConfig().command_timeout_s, Future,
                                    self._wake_executor)
        for name, handler in services.items():
            refusals.service(self, Trigger, name, handler)
        refusals.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        latency_pub = LatencyTrace.publisher(self)
        refusals.timer(self, FLUSH_PERIOD_S, lambda: self.latency.flush(latency_pub), "latency trace")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if p["autostart"]:
            run_autostart(self, self._autostart_error)

    @property
    def runtime(self):
        """The policy's runtime while configured (vam_control.runtime.PolicyRuntime), else None."""
        return self.core.runtime

    def _autostart_error(self, step: str) -> Exception:
        return self._error or RuntimeError(f"vam_policy_node: autostart could not {step}")

    def _wake_executor(self) -> None:
        executor = self.executor
        if executor is not None:
            executor.wake()

    def on_configure(self, state) -> TransitionCallbackReturn:
        p = self._params
        try:
            policy = self._injected if self._injected is not None else policy_from_params(p, self.get_logger())
            self.core.configure(policy, p, self._publish_target, self._publish_telemetry, self.get_logger())
        except Exception as e:
            self._error = e
            say_configure_failed(self.get_logger(), e)
            self._release()
            return TransitionCallbackReturn.FAILURE
        # the ros2_control outputs asked for, made once (a reconfigure keeps them)
        self.pub.update({key: ros.publisher(self, key) for key in OUTPUTS[p["command_outputs"]] if key not in self.pub})
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        self.core.activate(self._params["instruction"])
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self.core.deactivate()
        self.get_logger().info("deactivated: episode stopped (the arm holds), instructions refused")
        return super().on_deactivate(state)

    def _release(self) -> bool:
        """Stop the executor (the driver holds), release the policy; False: still stopping. Idempotent."""
        return self.core.release(self.STOP_BUDGET_S)

    def _on_instruction(self, msg) -> None:
        if not self.core.takes_instructions():
            self.get_logger().warning("instruction ignored: the policy node is not active", throttle_duration_sec=5.0)
            return
        try:
            replaced = self.core.instruct(msg.data)
        except ValueError as e:
            self._refused["instruction"].refuse(str(e))
            return
        if replaced is not None:
            self._replacing.refuse(replaced)

    def _on_estop(self, msg) -> None:
        self.core.estop(bool(msg.data))

    def _on_image(self, msg) -> None:
        """Store the newest frame: its pixels read in place (a compressed one decoded), copied once."""
        received = LatencyTrace.now_ns()
        stamp = msg.header.stamp
        arrival = self.get_clock().now().nanoseconds * 1e-9
        runtime = self.core.runtime
        if runtime is not None:
            try:
                frame = (image_msgs.compressed_image_to_numpy(msg) if self._compressed
                         else image_msgs.image_to_numpy(msg, copy=False))   # a view; add_frame copies it
                runtime.add_frame(frame)
            except ValueError as e:  # MessageError included
                self._refused["camera frame"].refuse(str(e))
                return
            self.latency.note(stamp_key(stamp), received=received, input=LatencyTrace.now_ns())
        self.frames_in.add(arrival, stamp.sec + stamp.nanosec * 1e-9)   # frames the policy took: rate, latency

    def _on_state(self, msg) -> None:
        runtime = self.core.runtime
        if runtime is not None:
            try:
                js = msgs.joint_state_to_numpy(msg)
                runtime.set_state(js.names, js.position)
            except ValueError as e:
                self._refused["joint state"].refuse(f"{e} (the arm holds when states go stale)")

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Live tuning (`params.tune_live`); rclpy refuses the read-only parameters before this callback."""
        changes = {q.name: q.value for q in params}
        ok, reason, self._params = tune_live(self.core.policy, self._params, changes, self.get_logger())
        return SetParametersResult(successful=ok, reason=reason)

    def _publish(self, key: str, msg) -> None:
        """Publish an rclpy message unless the node is closing."""
        with self._publish_lock:
            if not self._closing:
                self.pub[key].publish(msg)

    def _publish_target(self, sent) -> None:
        for key, msg in self.core.target_messages(sent, self.get_clock().now().nanoseconds, self.pub):
            self._publish(key, msg)

    def _publish_telemetry(self, tel: dict) -> None:
        for key, msg in telemetry_messages(tel):
            self._publish(key, ros.to_ros(msg))

    def _publish_diagnostics(self) -> None:
        refusals.flush_refusals(self)
        refused = {kind: log.total for kind, log in self._refused.items()}
        device = str(getattr(self.core.policy, "device", self._params["device"]))
        self.pub["diagnostics"].publish(ros.diagnostics(self, self.core.diagnostics(refused, device, self.frames_in)))

    def destroy_node(self) -> None:
        """Safe state: stop the executor (the driver holds), then the ROS entities; nothing published since."""
        with self._publish_lock:
            self._closing = True
        if not self._release():
            self.get_logger().warning(f"the policy is still stopping after {self.STOP_BUDGET_S:.0f} s; exiting "
                                      f"without waiting: the driver holds")
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(VamPolicyNode, args, exit_process=True)


if __name__ == "__main__":
    main()
