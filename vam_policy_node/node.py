"""vam_policy_node: the VAM policy, its chunk executor and the safety filter behind ROS 2 topics.

In: the stacked camera frame (raw, or JPEG on its /compressed topic with image_transport:=compressed;
a frame window, the newest frame is the current observation),
/joint_states (proprio, matched by name), /vam/instruction (the newest starts an episode, at most
one start every 0.5 s: one arriving meanwhile replaces the waiting one, so a burst ends with the
newest and no stale episode starts after it; one arriving mid-episode logs what it replaced;
`vam_policy_node.instructions`),
/vam/estop (true latches a hold and stops the policy; false releases the latch, motion waits
for the next episode), services ~/start_episode and ~/reset (std_srvs/Trigger).
Out: /vam/joint_targets at the control rate (JointState with names), /vam/telemetry (JSON),
/vam/attention, /diagnostics (latency, tick timing, holds).
The work is `PolicyRuntime` (plain Python, vam_control/runtime.py): callbacks only store
inputs and queue commands; episodes start and stop in its control thread; inference runs in
the executor's worker thread, never in a callback; targets go out from its tick thread
through the safety filter (absolute joints) or an e-stop gate (end-effector deltas).

No message or service call ends the node: a malformed frame, joint state or instruction is
refused with a rate-limited log line (the first reason of each second in full, then a count;
`vam_stack.refusals`), anything else a callback raises is refused the same way (`ros.guarded`),
and an invalid lifecycle transition is refused by the lifecycle (`ros.SafeLifecycle`), the node
staying in its state. An exception that ends the process anyway stops the policy; the driver
then holds the arm (its watchdog), torque on.
"""
from __future__ import annotations

import contextlib
import signal
import threading

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from rclpy.task import Future
from std_srvs.srv import Trigger

from camera_bridge.preprocess import fit_views
from vam_model.policy import check_action_temperature
from vam_control.executor import libero_config, robot_config
from vam_policy_node.instructions import InstructionMailbox
from vam_policy_node.params import (PARAMS, TUNABLE, WEIGHT_RANGE, guidance_from,  # noqa: F401 (the node's
                                    policy_from_params, resolve_backend)          # parameters, re-exported)
from vam_control.runtime import PolicyRuntime, RuntimeConfig, warm_up
from vam_stack.arrivals import ArrivalStats
from vam_stack.instruction import check_instruction, shorten
from vam_stack.latency import FLUSH_PERIOD_S, LatencyTrace, stamp_key
from vam_control.pacing import IncreasingStamps
from vam_control.safety import SafetyFilter, load_safety_config
from vam_stack import msgs, ros
from vam_stack.robot import check_layers
from vam_stack.topics import JOINT_TARGETS_SOURCE, LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES


@contextlib.contextmanager
def _interruptible():
    """SIGINT/SIGTERM raise KeyboardInterrupt while the block runs (the main thread only; the
    handlers before it are kept and restored). `ros.spin_nodes` only notes the signal until the
    nodes are built: the autostart's load and warm-up (108 s for yam64 in torch on a loaded CPU)
    went on past launch's SIGTERM (5 s) and SIGKILL (10 s). The KeyboardInterrupt ends the
    constructor (its child process is ended with it) and spin_nodes exits 0, an operator's stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def interrupt(signum, frame):
        handler = previous.get(signum)
        if callable(handler):
            handler(signum, frame)       # spin_nodes' own: it notes the stop too
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class VamPolicyNode(ros.SafeLifecycle, LifecycleNode):
    """Managed: configure = build the policy (load the weights) and warm it up; activate = take
    instructions (and start `instruction` if set); deactivate = stop the episode (the arm holds),
    refuse instructions; cleanup = release the policy. `autostart` does configure + activate at
    start-up. A failure of the autostart raises the configure's own exception."""

    def __init__(self, policy=None, **node_kwargs):
        super().__init__("vam_policy_node", **node_kwargs)
        self._injected = policy
        self.policy = None
        self.runtime: PolicyRuntime | None = None
        self.active = False
        self.warm_up_times: dict[str, float] = {}
        self._estop_latched = False          # an e-stop that came before the runtime existed
        self._error: BaseException | None = None
        p = self._params = ros.declare(self, PARAMS)
        self.pub = {k: ros.publisher(self, k) for k in ("joint_targets", "telemetry", "attention", "diagnostics")}
        self._publish_lock, self._closing = threading.Lock(), False
        self._stamps = IncreasingStamps()                    # /vam/joint_targets stamps, strictly increasing
        self.frames_in = ArrivalStats(p["camera_rate_hz"])   # capture -> policy latency, gaps (diagnostics)
        self._compressed = p["image_transport"] == "compressed"
        self.mailbox: InstructionMailbox | None = None       # made with the runtime (configure)
        self._refused = {k: ros.refusal_log(self, k) for k in ("camera frame", "joint state")}
        self._refused["instruction"] = ros.refusal_log(self, "instruction", "warning")
        self._replacing = ros.refusal_log(self, "new instruction", "info", verb="accepted")
        self.latency = LatencyTrace("vam_policy_node")     # per-frame stage stamps for `bench ros` (debug topic)
        ros.subscription(self, "stacked_image_compressed" if self._compressed else "stacked_image", self._on_image)
        ros.subscription(self, "joint_states", self._on_state)
        ros.subscription(self, "instruction", self._on_instruction)
        # the e-stop in its own group (never behind another group's callback where a multi-threaded
        # executor spins the node)
        self.estop_group = MutuallyExclusiveCallbackGroup()
        ros.subscription(self, "estop", self._on_estop, self.estop_group)
        # start/reset take up to command_timeout_s (the control thread stops an inference in flight and
        # embeds the instruction): the services await the answer as coroutines, so the executor keeps
        # serving the e-stop, images and states meanwhile, on one thread
        ros.service(self, Trigger, "~/start_episode", self._service(lambda rt, done: rt.request_start(
            None, on_done=done)))
        ros.service(self, Trigger, "~/reset", self._service(lambda rt, done: rt.request_stop(
            "reset service", on_done=done)))
        ros.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        latency_pub = LatencyTrace.publisher(self)
        ros.timer(self, FLUSH_PERIOD_S, lambda: self.latency.flush(latency_pub), "latency trace")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if p["autostart"]:
            try:
                with _interruptible():       # a Ctrl-C during the load and warm-up (seconds to minutes) stops it
                    self.autostart(lambda step: self._error or RuntimeError(f"vam_policy_node: autostart could not "
                                                                           f"{step}"))
            except BaseException:
                self.destroy_node()
                raise

    # --- lifecycle ------------------------------------------------------------------------
    def on_configure(self, state) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as e:
            self._error = e
            self.get_logger().error(f"configure failed: {type(e).__name__}: {e}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        p = self._params
        if self._injected is not None:  # (tests, in-process demos): its model config, if it has one
            self.policy = self._injected
        else:
            self.policy = policy_from_params(p)
        s = self.policy.spec
        rates = dict(chunk=s.chunk, execute=s.execute, action_dim=s.action_dim, rate_hz=float(s.rate_hz),
                     rt_priority=p["rt_priority"], rtc=p["rtc"])
        safety = None
        if s.action_type != "eef_delta":  # absolute joint targets: the arm's names and the safety filter
            from yam_driver.config import load_config
            driver_cfg = load_config(ros.config_path(p["driver_config"], "yam_driver_damiao.yaml"))
            state_names = self.action_names = driver_cfg.joint_names
            safety = SafetyFilter(load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")))
            check_layers(driver_cfg, safety.cfg)   # the driver's limits sit inside the filter's
            if (safety.cfg.dim, safety.cfg.rate_hz) != (s.action_dim, float(s.rate_hz)):
                raise ros.ParameterError(f"safety config is for {safety.cfg.dim} dims at {safety.cfg.rate_hz} Hz, "
                                         f"the policy sends {s.action_dim} at {s.rate_hz} Hz")
            ex_cfg = robot_config(**rates)
        else:
            state_names, self.action_names = LIBERO_PROPRIO_NAMES, list(LIBERO_ACTION_NAMES)
            ex_cfg = libero_config(mode="realtime", **rates)
        # absolute targets carry the filter's tag: the driver follows nothing else (yam_driver.command_gate)
        self._target_source = JOINT_TARGETS_SOURCE if safety is not None else ""
        if len(self.action_names) != s.action_dim:
            raise ros.ParameterError(f"{len(self.action_names)} joint names for a policy with {s.action_dim} actions")
        cfg = RuntimeConfig(p["max_frame_age_s"], p["max_state_age_s"], on_overrun=p["on_overrun"])
        outputs = {"none": (), "joint_trajectory": ("joint_trajectory",), "forward_command": ("forward_commands",),
                   "both": ("joint_trajectory", "forward_commands")}[p["command_outputs"]]
        if outputs and safety is None:
            raise ros.ParameterError(f"command_outputs {p['command_outputs']!r} needs absolute joint targets; this "
                                     f"policy sends {s.action_type!r}")
        for k in outputs:
            if k not in self.pub:
                self.pub[k] = ros.publisher(self, k)
        self._period_s = 1.0 / float(s.rate_hz)
        if p["warm_up"]:
            self.warm_up_times = warm_up(self.policy, guidance_from(p), p["seed"])
            self.get_logger().info("warmed up: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.warm_up_times.items()))
        self.runtime = rt = PolicyRuntime(self.policy, ex_cfg, cfg, state_names, self._publish_target,
                                          self._publish_telemetry, safety, log=self.get_logger(), fit_views=fit_views)
        self.mailbox = InstructionMailbox(lambda text, done: rt.request_start(text, on_done=done),
                                          lambda: rt.instruction if rt.executor.running else None)
        if self._estop_latched:
            self.runtime.estop(True)
        self.get_logger().info(f"{s.action_type} policy, {s.action_dim} actions at {s.rate_hz} Hz, "
                               f"input: the current {s.height}x{s.width} stacked frame and {s.proprio_dim} proprio")

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

    def _release(self) -> None:
        """Stop the executor (the driver then holds) and release the policy. Idempotent."""
        self.active = False
        with self._publish_lock:
            runtime, self.runtime = self.runtime, None
            mailbox, self.mailbox = self.mailbox, None
        if mailbox is not None:
            mailbox.clear()
        if runtime is not None:
            runtime.begin_close()          # no further target: the driver holds the last one
        policy, self.policy = self.policy, None
        if policy is not None and hasattr(policy, "close"):
            policy.close()                 # a replan in flight is abandoned (its child process ends)
        if runtime is not None:
            runtime.close(self.STOP_BUDGET_S / 2)

    def _on_instruction(self, msg) -> None:
        mailbox = self.mailbox
        if mailbox is None or not self.active:
            self.get_logger().warning("instruction ignored: the policy node is not active", throttle_duration_sec=5.0)
            return
        try:
            text = check_instruction(msg.data)     # refused here: junk never replaces a valid instruction
        except ValueError as e:
            self._refused["instruction"].refuse(str(e))
            return
        o = mailbox.offer(text)
        said = []
        if o.replaced_running is not None:
            said.append(f"replaces the episode {shorten(repr(o.replaced_running))}")
        if o.replaced_waiting is not None:
            said.append(f"replaces {shorten(repr(o.replaced_waiting))}, which never started")
        if said:
            self._replacing.refuse(f"{shorten(repr(text))} " + "; ".join(said) +
                                   ("" if o.started else " (starts once the start in flight is answered)"))

    def _on_estop(self, msg) -> None:
        self._estop_latched = bool(msg.data)
        if self.runtime is not None:
            self.runtime.estop(bool(msg.data))

    def _on_image(self, msg) -> None:
        """Store the newest frame, nothing else: the rclpy message's pixel buffer is read in place
        (raw; a compressed frame is decoded) and copied once, into the policy's input slot."""
        received = LatencyTrace.now_ns()
        stamp = msg.header.stamp
        arrival = self.get_clock().now().nanoseconds * 1e-9
        runtime = self.runtime
        if runtime is None:
            self.frames_in.add(arrival, stamp.sec + stamp.nanosec * 1e-9)
            return
        try:
            if self._compressed:
                frame = msgs.compressed_image_to_numpy(msg)      # duck-typed: format and data read in place
            else:
                frame = msgs.image_to_numpy(msg, copy=False)     # a view of msg.data; add_frame copies it
            runtime.add_frame(frame)
        except ValueError as e:  # MessageError included
            self._refused["camera frame"].refuse(str(e))
            return
        self.frames_in.add(arrival, stamp.sec + stamp.nanosec * 1e-9)   # frames the policy took: rate, latency
        self.latency.note(stamp_key(stamp), received=received, input=LatencyTrace.now_ns())

    def _on_state(self, msg) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        try:
            js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
            runtime.set_state(js.names, js.position)
        except ValueError as e:
            self._refused["joint state"].refuse(f"{e} (the arm holds when states go stale)")

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Live tuning of what is safe to tune (TUNABLE: the guidance schedule, weights, s_max, TR per
        step, the action temperature): the whole new setting is checked before anything changes, and
        a bad one is refused with the reason; it applies from the next replan (the TR monitor's
        w_lang / w_plan / s and the telemetry's `guidance` show it). Everything else is read-only
        (rclpy refuses those before this callback)."""
        changes = {q.name: q.value for q in params}
        unknown = sorted(set(changes) - set(TUNABLE))
        if unknown:
            return SetParametersResult(successful=False, reason=f"{unknown} cannot change while the node runs")
        if not changes:
            return SetParametersResult(successful=True)
        merged = {**self._params, **changes}
        try:
            guidance = guidance_from(merged)
            check_action_temperature(merged["action_temperature"], "action_temperature")
            if self.policy is not None:           # else: the values take effect at configure
                if not hasattr(self.policy, "configure"):
                    raise ros.ParameterError(f"this policy ({type(self.policy).__name__}) cannot be tuned live")
                self.policy.configure(guidance=guidance, action_temperature=float(merged["action_temperature"]))
        except (ValueError, TypeError) as e:      # ConfigError / ParameterError are ValueErrors
            return SetParametersResult(successful=False, reason=str(e))
        except Exception as e:                    # a service call never ends the node: refused, said why
            from vam_stack.refusals import describe

            return SetParametersResult(successful=False, reason=f"internal error: {describe(e)}")
        self._params = merged
        self.get_logger().info("tuned live (from the next replan): " + ", ".join(
            f"{k}={v!r}" for k, v in sorted(changes.items())))
        return SetParametersResult(successful=True)

    def _service(self, request_fn):
        """An async Trigger callback: `request_fn(runtime, done)` queues the command; the answer is the
        control thread's (ok, message), or a refusal after command_timeout_s (or when not active)."""
        timeout_s = RuntimeConfig().command_timeout_s

        async def handle(request, response):
            runtime = self.runtime
            if runtime is None or not self.active:
                response.success, response.message = False, "the policy node is not active"
                return response
            future, lock = Future(), threading.Lock()

            def done(ok: bool, message: str) -> None:   # control thread or timer; the first answer counts
                with lock:
                    if future.done():
                        return
                    future.set_result((ok, message))
                executor = self.executor
                if executor is not None:
                    executor.wake()                         # resume the awaiting service now, not at the next message

            timer = threading.Timer(timeout_s, done, (False, f"still busy after {timeout_s:.0f} s"))
            timer.daemon = True
            timer.start()
            request_fn(runtime, done)
            response.success, response.message = await future
            timer.cancel()
            return response
        return handle

    def _publish(self, key: str, msg) -> None:
        """From the executor's threads: nothing is published once destroy_node began (a worker
        still finishing an inference must not publish on a destroyed publisher)."""
        with self._publish_lock:
            if not self._closing:
                self.pub[key].publish(msg)

    def _publish_target(self, sent: np.ndarray) -> None:
        """Executor tick thread: the safety-filtered target, named (and, with command_outputs, the same
        target for ros2_control's controllers)."""
        # strictly after the last target (the driver refuses a stamp that is not): under use_sim_time the node's
        # clock is the last /clock received, which two ticks of this host-paced thread can both read
        stamp = msgs.time_from_ns(self._stamps.next(self.get_clock().now().nanoseconds))
        self._publish("joint_targets", ros.to_ros(msgs.joint_state_msg(
            self.action_names, sent, stamp_s=stamp, frame_id=self._target_source)))
        if "joint_trajectory" in self.pub:
            self._publish("joint_trajectory", ros.to_ros(msgs.joint_trajectory_msg(
                self.action_names, sent[None], [self._period_s], stamp, self._target_source)))
        if "forward_commands" in self.pub:
            self._publish("forward_commands", ros.to_ros(msgs.float64_array_msg(sent)))

    def _publish_telemetry(self, tel: dict) -> None:
        """Executor worker thread: TR telemetry of one replan, then its attention on its own topic
        (the telemetry names the token grid the monitor draws the attention on)."""
        att = tel.pop("attention", None)
        clean = {k: _plain(v) for k, v in tel.items() if k not in ("actions", "origin_tick", "latency_s")}
        self._publish("telemetry", ros.to_ros(msgs.json_msg(clean)))
        if att is not None:
            self._publish("attention", ros.to_ros(msgs.float32_array_msg(att, ["action", "video_token"])))

    def _publish_diagnostics(self) -> None:
        ros.flush_refusals(self)
        rt = self.runtime
        if rt is None:
            self.pub["diagnostics"].publish(ros.diagnostics(self, [
                {"task": "executor", "level": "stale", "message": "not configured (no policy)",
                 "values": {"estop": self._estop_latched}}]))
            return
        status = rt.status()
        mailbox = self.mailbox
        status.update({f"refused_{k.replace(' ', '_')}s": v.total for k, v in self._refused.items()},
                      instructions_coalesced=mailbox.coalesced if mailbox is not None else 0)
        level = "warn" if rt.estopped or rt.executor.errors else "ok"
        message = "e-stop latched" if rt.estopped else ("running" if rt.executor.running else "idle (holding)")
        if status["overrun"]:
            level, message = "error", "overrun: inference slower than a whole chunk, no chunk usable (holding)"
        elif status.get("safety_watchdog"):
            level, message = "error", "safety watchdog: no target reached the filter in time (holding)"
        self.pub["diagnostics"].publish(ros.diagnostics(self, [
            {"task": "executor", "level": level, "message": message, "values": status,
             "hardware_id": str(getattr(self.policy, "device", self._params["device"]))},
            {"task": "camera input", "level": "ok" if self.frames_in.count else "stale",
             "message": f"{self.frames_in.count} frames received",
             "values": self.frames_in.summary("frames_")}]))

    # launch sends SIGTERM 5 s after SIGINT and SIGKILL 5 s after that; the node stops within this,
    # well inside launch's first deadline: a replan in flight is abandoned, not waited for
    STOP_BUDGET_S = 1.0

    def destroy_node(self) -> None:
        """Safe state: stop the executor (the driver then holds its last target), then the ROS
        entities. Nothing is published once this begins. An inference in flight is abandoned (the
        policy's child process is ended: its chunk could not be used after the stop) and an episode
        start in the control thread does not begin; past STOP_BUDGET_S the node goes on without
        waiting (its threads are daemons; the policy's child process ends with the process)."""
        with self._publish_lock:
            self._closing = True
        releasing = threading.Thread(target=self._release, name="policy-release", daemon=True)
        releasing.start()
        releasing.join(self.STOP_BUDGET_S)
        if releasing.is_alive():
            self.get_logger().warning(f"the policy is still stopping after {self.STOP_BUDGET_S:.0f} s; exiting without "
                                      f"waiting: the driver holds")
        super().destroy_node()


def _plain(v):
    """JSON-ready value: NaN/inf become null, arrays lists."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return None
    return v


def main(args=None) -> None:
    ros.spin_node(VamPolicyNode, args)


if __name__ == "__main__":
    main()
