"""vam_policy_node: the VAM policy, its chunk executor and the safety filter behind ROS 2 topics:
parameters (`params`) and wiring; the work is plain Python (`vam_control.build.build_runtime`).

In: the stacked frame (raw or JPEG; the newest is the observation), /joint_states (by name),
/vam/instruction (a burst coalesced: `instructions`), /vam/estop (true latches a hold and stops the
policy, false releases it: nothing moves until an instruction or a start arrives after the release;
one waiting or queued before it is forgotten), ~/start_episode and ~/reset
(`services`). Out: /vam/joint_targets at the control rate, /vam/telemetry, /vam/attention,
/diagnostics. Callbacks only store inputs and queue commands. No message or service call ends the
node (refusals: `vam_stack.refusals`, `ros.guarded`, `ros.SafeLifecycle`); a process that ends anyway
stops the policy, and the driver holds the arm (its watchdog), torque on.
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("vam_policy_node")   # before the heavy imports below

import threading

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.task import Future
from std_srvs.srv import Trigger

from vam_control.build import diagnostics, release
from vam_control.pacing import IncreasingStamps
from vam_control.runtime import RuntimeConfig
from vam_policy_node.instructions import InstructionMailbox
from vam_policy_node.params import (OUTPUTS, PARAMS, TUNABLE, WEIGHT_RANGE, control_from_params,  # noqa: F401
                                    guidance_from, policy_from_params, resolve_backend, tune_live)  # (re-exported)
from vam_policy_node.services import episode_services
from vam_policy_node.startup import run_autostart, stop_requested
from vam_stack import msgs, ros
from vam_stack.arrivals import ArrivalStats
from vam_stack.instruction import check_instruction
from vam_stack.latency import FLUSH_PERIOD_S, LatencyTrace, stamp_key
from vam_stack.recording import json_ready


class VamPolicyNode(ros.SafeLifecycle, LifecycleNode):
    """Managed: configure = build the policy, its runtime, warm up; activate = take instructions (start
    `instruction` if set); deactivate = stop the episode (the arm holds); cleanup = release the policy."""

    STOP_BUDGET_S = 1.0   # the stop's budget, well inside launch's SIGTERM 5 s after SIGINT (then SIGKILL)

    def __init__(self, policy=None, **node_kwargs):
        super().__init__("vam_policy_node", **node_kwargs)
        self._injected, self.policy, self.runtime, self.mailbox, self.control = policy, None, None, None, None
        self.active, self.warm_up_times, self._error = False, {}, None
        self._estop_latched = False          # an e-stop that came before the runtime existed
        p = self._params = ros.declare(self, PARAMS)
        self.pub = {k: ros.publisher(self, k) for k in ("joint_targets", "telemetry", "attention", "diagnostics")}
        self._publish_lock, self._closing = threading.Lock(), False
        self._stamps = IncreasingStamps()                    # /vam/joint_targets stamps, strictly increasing
        self.frames_in = ArrivalStats(p["camera_rate_hz"])   # capture -> policy latency, gaps (diagnostics)
        self._compressed = p["image_transport"] == "compressed"
        self._refused = {k: ros.refusal_log(self, k, *level) for k, level in (
            ("camera frame", ()), ("joint state", ()), ("instruction", ("warning",)))}
        self._replacing = ros.refusal_log(self, "new instruction", "info", verb="accepted")
        self.latency = LatencyTrace("vam_policy_node")     # per-frame stage stamps for `bench ros` (debug topic)
        ros.subscription(self, "stacked_image_compressed" if self._compressed else "stacked_image", self._on_image)
        ros.subscription(self, "joint_states", self._on_state)
        ros.subscription(self, "instruction", self._on_instruction)   # the e-stop in its own group: never behind
        estop_group = MutuallyExclusiveCallbackGroup()                                # another's callback
        ros.subscription(self, "estop", self._on_estop, estop_group)
        # and the e-stop service's latched state (vam_stack/estop.py), replayed to this node when it joins late
        ros.latched_subscription(self, "estop_state", self._on_estop, estop_group)
        for name, handler in episode_services(lambda: self.runtime if self.active else None,
                                              RuntimeConfig().command_timeout_s, Future,
                                              lambda: (e := self.executor) is not None and e.wake()).items():
            ros.service(self, Trigger, name, handler)
        ros.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        latency_pub = LatencyTrace.publisher(self)
        ros.timer(self, FLUSH_PERIOD_S, lambda: self.latency.flush(latency_pub), "latency trace")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if p["autostart"]:
            run_autostart(self, lambda step: self._error or RuntimeError(f"vam_policy_node: autostart could not "
                                                                         f"{step}"))

    def on_configure(self, state) -> TransitionCallbackReturn:
        p = self._params
        try:
            self.policy = self._injected if self._injected is not None else policy_from_params(p, self.get_logger())
            self.control, self.warm_up_times = control_from_params(self.policy, p, self._publish_target,
                                                                   self._publish_telemetry, self.get_logger())
        except Exception as e:
            self._error = e
            if stop_requested.is_set():
                self.get_logger().info(f"configure interrupted by the operator's stop ({type(e).__name__}: {e})")
            else:
                self.get_logger().error(f"configure failed: {type(e).__name__}: {e}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        self.pub.update({k: ros.publisher(self, k) for k in OUTPUTS[p["command_outputs"]] if k not in self.pub})
        self.runtime = rt = self.control.runtime
        self.mailbox = InstructionMailbox(lambda text, done: rt.request_start(text, on_done=done),
                                          lambda: rt.instruction if rt.executor.running else None)
        if self._estop_latched:
            rt.estop(True)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        self.active = True
        if self._params["instruction"]:
            self.runtime.request_start(self._params["instruction"])
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self.active = False
        if self.mailbox is not None:
            self.mailbox.clear()          # a waiting instruction is not started after a deactivate
        self.runtime.request_stop("deactivated", wait=True)
        self.get_logger().info("deactivated: episode stopped (the arm holds), instructions refused")
        return super().on_deactivate(state)

    def _release(self) -> bool:
        """Stop the executor (the driver holds), release the policy; False: still stopping. Idempotent."""
        self.active = False
        with self._publish_lock:
            runtime, mailbox, policy = self.runtime, self.mailbox, self.policy
            self.runtime = self.mailbox = self.policy = None
        if mailbox is not None:
            mailbox.clear()
        return release(runtime, policy, self.STOP_BUDGET_S)

    def _on_instruction(self, msg) -> None:
        if self.mailbox is None or not self.active:
            self.get_logger().warning("instruction ignored: the policy node is not active", throttle_duration_sec=5.0)
            return
        try:
            text = check_instruction(msg.data)     # refused here: junk never replaces a valid instruction
        except ValueError as e:
            return self._refused["instruction"].refuse(str(e))
        if (said := self.mailbox.offer(text).describe(text)) is not None:
            self._replacing.refuse(said)

    def _on_estop(self, msg) -> None:
        self._estop_latched = bool(msg.data)
        if (mailbox := self.mailbox) is not None:
            mailbox.clear()               # an instruction waiting its turn is forgotten at a latch and a release
        if self.runtime is not None:
            self.runtime.estop(bool(msg.data))   # and so is every start queued before either (runtime docstring)

    def _on_image(self, msg) -> None:
        """Store the newest frame: its pixels read in place (a compressed one decoded), copied once."""
        received, stamp, runtime = LatencyTrace.now_ns(), msg.header.stamp, self.runtime
        arrival = self.get_clock().now().nanoseconds * 1e-9
        if runtime is not None:
            try:
                runtime.add_frame(msgs.compressed_image_to_numpy(msg) if self._compressed
                                  else msgs.image_to_numpy(msg, copy=False))    # a view; add_frame copies it
            except ValueError as e:  # MessageError included
                return self._refused["camera frame"].refuse(str(e))
            self.latency.note(stamp_key(stamp), received=received, input=LatencyTrace.now_ns())
        self.frames_in.add(arrival, stamp.sec + stamp.nanosec * 1e-9)   # frames the policy took: rate, latency

    def _on_state(self, msg) -> None:
        if (runtime := self.runtime) is not None:
            try:
                js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
                runtime.set_state(js.names, js.position)
            except ValueError as e:
                self._refused["joint state"].refuse(f"{e} (the arm holds when states go stale)")

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Live tuning (`params.tune_live`); rclpy refuses the read-only parameters before this callback."""
        ok, reason, self._params = tune_live(self.policy, self._params, {q.name: q.value for q in params},
                                             self.get_logger())
        return SetParametersResult(successful=ok, reason=reason)

    def _publish(self, key: str, msg) -> None:
        with self._publish_lock:
            if not self._closing:
                self.pub[key].publish(ros.to_ros(msg))

    def _publish_target(self, sent) -> None:
        # stamps strictly increasing (the driver refuses one that is not): two ticks can read one /clock
        stamp = msgs.time_from_ns(self._stamps.next(self.get_clock().now().nanoseconds))
        for key, msg in self.control.target_messages(sent, stamp, self.pub):
            self._publish(key, msg)

    def _publish_telemetry(self, tel: dict) -> None:
        att = tel.pop("attention", None)        # on its own topic; the telemetry names its token grid
        self._publish("telemetry", msgs.json_msg({k: json_ready(v) for k, v in tel.items()
                                                  if k not in ("actions", "origin_tick", "latency_s")}))
        if att is not None:
            self._publish("attention", msgs.float32_array_msg(att, ["action", "video_token"]))

    def _publish_diagnostics(self) -> None:
        ros.flush_refusals(self)
        self.pub["diagnostics"].publish(ros.diagnostics(self, diagnostics(
            self.runtime, {**{f"refused_{k.replace(' ', '_')}s": v.total for k, v in self._refused.items()},
                           "instructions_coalesced": self.mailbox.coalesced if self.mailbox is not None else 0},
            self._estop_latched, str(getattr(self.policy, "device", self._params["device"])), self.frames_in)))

    def destroy_node(self) -> None:
        """Safe state: stop the executor (the driver holds), then the ROS entities; nothing published since."""
        with self._publish_lock:
            self._closing = True
        if not self._release():
            self.get_logger().warning(f"the policy is still stopping after {self.STOP_BUDGET_S:.0f} s; exiting without "
                                      f"waiting: the driver holds")
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(VamPolicyNode, args, exit_process=True)


if __name__ == "__main__":
    main()
