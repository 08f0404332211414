"""vam_policy_node: the VAM policy, its chunk executor and the safety filter behind ROS 2 topics.

In: the stacked camera frame (a frame window; the newest frame is the current observation),
/joint_states (proprio, matched by name), /vam/instruction (each message starts an episode),
/vam/estop (true latches a hold and stops the policy; false releases the latch, motion waits
for the next episode), services ~/start_episode and ~/reset (std_srvs/Trigger).
Out: /vam/joint_targets at the control rate (JointState with names), /vam/telemetry (JSON),
/vam/attention, /diagnostics (latency, tick timing, holds).
Threads: callbacks only store inputs and queue commands; episodes start and stop in a control
thread; inference runs in the executor's worker thread, never in a callback; targets go out
from its tick thread through the safety filter (absolute joints) or an e-stop gate (deltas).
"""
from __future__ import annotations

import functools
import queue
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from std_srvs.srv import Trigger

from camera_bridge.window import FrameRing
from vam_policy_node.executor import ChunkExecutor, libero_config, robot_config
from vam_policy_node.safety import SafetyFilter, load_safety_config
from vam_stack import msgs, ros
from vam_stack.topics import LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES

P = ros.Param
PARAMS = (
    P("preset", "tiny", "model preset (models/<preset>.yaml) used when no checkpoint is given"),
    P("checkpoint", "", "safetensors checkpoint; empty = models/<preset>.safetensors if shipped, else seeded random weights"),
    P("guidance", "tr_adaptive", "guidance schedule", choices=("none", "flat", "tr_adaptive")),
    P("seed", 0, "noise seed of the policy", range=(0, 2**31 - 1)),
    P("instruction", "", "episode started as soon as frames and joint states arrive; empty = wait for /vam/instruction"),
    P("frame_skip", 0, "camera messages between window frames; 0 = the model preset's", range=(0, 30)),
    P("safety_config", "", "safety limits YAML (absolute joint targets); empty = config/yam_safety.yaml"),
    P("driver_config", "", "yam_driver YAML naming the 14 joints; empty = config/yam_driver_damiao.yaml"),
    P("max_frame_age_s", 0.5, "newest camera frame older than this holds the arm [s]", range=(0.01, 10.0)),
    P("max_state_age_s", 0.5, "joint state older than this holds the arm [s]", range=(0.01, 10.0)),
    P("rt_priority", 0, "SCHED_FIFO priority of the executor tick thread, 0 = normal scheduling", range=(0, 99)),
    P("policy_process", False, "run the policy in a child process (its Python work off the tick thread's GIL)"),
    P("diagnostics_period_s", 1.0, "period of /diagnostics [s]", range=(0.1, 60.0)),
)


def build_policy(p: dict):
    """The policy the parameters name (a ProcessPolicy proxy with `policy_process`)."""
    from vam_policy_node.policy import build_policy as build
    from vam_stack.paths import models_dir

    shipped = models_dir() / f"{p['preset']}.safetensors"
    ckpt = p["checkpoint"] or (str(shipped) if shipped.is_file() else None)
    factory = functools.partial(build, p["preset"], checkpoint=ckpt, guidance=p["guidance"], seed=p["seed"])
    if p["policy_process"]:
        from vam_policy_node.executor_worker import ProcessPolicy
        return ProcessPolicy(factory)
    return factory()


class VamPolicyNode(Node):
    def __init__(self, policy=None, **node_kwargs):
        super().__init__("vam_policy_node", **node_kwargs)
        p = self.p = ros.declare(self, PARAMS)
        self.policy = policy if policy is not None else build_policy(p)
        s = self.spec = self.policy.spec
        self.absolute = s.action_type != "eef_delta"
        rates = dict(chunk=s.chunk, execute=s.execute, action_dim=s.action_dim, rate_hz=float(s.rate_hz), rt_priority=p["rt_priority"])
        if self.absolute:
            from yam_driver.config import load_config
            self.state_names = self.action_names = load_config(ros.config_path(p["driver_config"], "yam_driver_damiao.yaml")).joint_names
            self.safety = SafetyFilter(load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")))
            cfg = robot_config(**rates)
        else:
            self.state_names, self.action_names, self.safety = list(LIBERO_PROPRIO_NAMES), list(LIBERO_ACTION_NAMES), None
            cfg = libero_config(mode="realtime", **rates)
        if (len(self.action_names), len(self.state_names)) != (s.action_dim, s.proprio_dim):
            raise ros.ParameterError(f"joint names {self.action_names} do not fit a policy with {s.action_dim} actions / {s.proprio_dim} proprio")
        if self.safety is not None and (self.safety.cfg.dim, self.safety.cfg.rate_hz) != (s.action_dim, float(s.rate_hz)):
            raise ros.ParameterError(f"safety config is for {self.safety.cfg.dim} dims at {self.safety.cfg.rate_hz} Hz, "
                                     f"the policy sends {s.action_dim} at {s.rate_hz} Hz")
        robot = getattr(getattr(self.policy, "mcfg", None), "robot", None)
        self.skip = p["frame_skip"] or getattr(robot, "frame_skip", 1)
        self.ring = FrameRing((s.frames - 1) * self.skip + 1, (s.height, s.width, 3))
        self._lock = threading.Lock()
        self._frame_t = self._state_t = -1e9
        self._state: np.ndarray | None = None
        self._last_sent: np.ndarray | None = None
        self._estop = threading.Event()
        self._pending = p["instruction"] or None  # instruction waiting for its inputs
        self._instruction = self._pending
        self.executor = ChunkExecutor(self.policy, cfg, obs_fn=self._observation, sink=self._send, on_result=self._on_result)
        self.pub = {k: ros.publisher(self, k) for k in ("joint_targets", "telemetry", "attention", "diagnostics")}
        ros.subscription(self, "stacked_image", self._on_image)
        ros.subscription(self, "joint_states", self._on_state)
        ros.subscription(self, "instruction", lambda m: self._command("start", m.data))
        ros.subscription(self, "estop", self._on_estop)
        self.create_service(Trigger, "~/start_episode", lambda q, r: self._service("start", None, r))
        self.create_service(Trigger, "~/reset", lambda q, r: self._service("stop", "reset service", r))
        self.create_timer(p["diagnostics_period_s"], self._publish_diagnostics)
        self._commands: queue.Queue = queue.Queue()
        self._control = threading.Thread(target=self._control_loop, name="policy-control", daemon=True)
        self._control.start()
        self.get_logger().info(f"{s.action_type} policy, {s.action_dim} actions at {s.rate_hz} Hz, window {s.frames}x{s.height}x{s.width} skip {self.skip}")

    # ---- inputs (callbacks: store and return) ----
    def _on_image(self, msg) -> None:
        try:
            img = msgs.image_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/Image"))
            if img.shape != self.ring.frames.shape[1:]:
                raise msgs.MessageError(f"stacked frame is {img.shape}, the policy needs {self.ring.frames.shape[1:]}")
        except msgs.MessageError as e:
            self.get_logger().error(f"camera frame rejected: {e}")
            return
        with self._lock:
            self.ring.next_slot()[...] = img
            self.ring.commit(time.monotonic(), 0.0)
            self._frame_t = time.monotonic()

    def _on_state(self, msg) -> None:
        try:
            js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
            missing = [n for n in self.state_names if n not in js.names]
            if missing:
                raise msgs.MessageError(f"JointState lacks joints {missing} (has {js.names})")
            pos = js.position[[js.names.index(n) for n in self.state_names]]
            if not np.isfinite(pos).all():
                raise msgs.MessageError(f"JointState has non-finite positions {pos.tolist()}")
        except msgs.MessageError as e:
            self.get_logger().error(f"joint state rejected (arm held when states go stale): {e}")
            return
        with self._lock:
            self._state, self._state_t = pos, time.monotonic()

    def _on_estop(self, msg) -> None:
        if msg.data:
            self._estop.set()
            if self.safety is not None:
                self.safety.estop("operator /vam/estop")
            self.get_logger().warning("e-stop: holding, policy stopped")
            self._command("stop", "e-stop")
        elif self._estop.is_set():
            self._estop.clear()
            if self.safety is not None:
                self.safety.clear_estop()
            self.get_logger().warning("e-stop released; motion resumes with the next episode")

    def _command(self, kind: str, arg, done: dict | None = None) -> None:
        self._commands.put((kind, arg, done))

    def _service(self, kind: str, arg, response):
        done = {"event": threading.Event()}
        self._command(kind, arg, done)
        finished = done["event"].wait(10.0)
        response.success, response.message = (done["ok"], done["message"]) if finished else (False, "still busy after 10 s")
        return response

    # ---- control thread: episodes start and stop here, never in a callback ----
    def _control_loop(self) -> None:
        while True:
            try:
                kind, arg, done = self._commands.get(timeout=0.5)
            except queue.Empty:
                if self._pending and not self.executor.running and not self._estop.is_set():
                    self._start(self._pending, quiet=True)
                continue
            if kind == "exit":
                return
            ok, message = self._start(arg or self._instruction) if kind == "start" else self._stop(arg)
            if done is not None:
                done.update(ok=ok, message=message)
                done["event"].set()

    def _stop(self, why: str) -> tuple[bool, str]:
        self._pending = None
        if self.executor.running:
            self.executor.stop()
            self.get_logger().info(f"policy stopped ({why}); the arm holds")
        return True, f"stopped ({why})"

    def _start(self, instruction: str | None, quiet: bool = False) -> tuple[bool, str]:
        if self._estop.is_set():
            self._pending = None
            return self._refuse("e-stop latched: publish false on /vam/estop first")
        if not instruction:
            return self._refuse("no instruction: publish one on /vam/instruction")
        self._stop("new episode")
        self._pending = self._instruction = instruction
        with self._lock:
            state, fresh = self._state, time.monotonic() - self._state_t <= self.p["max_state_age_s"]
        if self.absolute and (state is None or not fresh):
            return self._refuse("waiting for fresh /joint_states to prime the safety filter", quiet)
        try:
            if self.safety is not None:
                self.safety.reset(state)
            self.executor.reset(instruction=instruction, initial_target=state if self.absolute else None)
            self.executor.start()
        except Exception as e:  # a bad instruction or a policy that cannot start: say why, stay held
            self._pending = None
            return self._refuse(f"episode not started: {type(e).__name__}: {e}")
        self._pending = None
        self.get_logger().info(f"episode started: {instruction!r}")
        return True, f"episode started: {instruction!r}"

    def _refuse(self, message: str, quiet: bool = False) -> tuple[bool, str]:
        (self.get_logger().debug if quiet else self.get_logger().error)(message)
        return False, message

    # ---- executor threads ----
    def _observation(self) -> dict:
        """Worker thread: the policy's input, or an exception (the executor then holds)."""
        now, n = time.monotonic(), self.spec.frames
        with self._lock:
            if self.ring.count < self.ring.capacity:
                raise RuntimeError(f"frame window not ready: {self.ring.count} of {self.ring.capacity} frames received")
            if now - self._frame_t > self.p["max_frame_age_s"]:
                raise RuntimeError(f"newest camera frame is {now - self._frame_t:.3f} s old")
            frames = self.ring.frames[self.ring.indices(n, self.skip)]  # [n, H, W, 3] copy, oldest first
            state, age = self._state, now - self._state_t
        if state is None or age > self.p["max_state_age_s"]:
            raise RuntimeError(f"no joint state for {age:.3f} s")
        return {"frames": frames, "proprio": state.astype(np.float32)}

    def _send(self, target: np.ndarray) -> None:
        """Tick thread: one target through the safety filter / e-stop gate onto the topic."""
        if self.safety is not None:
            sent = self.safety.filter(target).sent
        elif self._estop.is_set():  # delta actions: zero motion, gripper command kept
            sent = np.zeros_like(target)
            sent[-1] = self._last_sent[-1] if self._last_sent is not None else 0.0
        else:
            sent = target
        self._last_sent = sent
        self.pub["joint_targets"].publish(ros.to_ros(msgs.joint_state_msg(self.action_names, sent, stamp_s=ros.stamp(self))))

    def _on_result(self, tel: dict) -> None:
        """Worker thread: TR telemetry of one replan (attention on its own topic, first)."""
        tel = dict(tel, step=int(tel["origin_tick"]), request_latency_ms=1e3 * tel["latency_s"])
        att = tel.pop("attention", None)
        if att is not None:
            self.pub["attention"].publish(ros.to_ros(msgs.float32_array_msg(att, ["action", "video_token"])))
        clean = {k: _plain(v) for k, v in tel.items() if k not in ("actions", "origin_tick", "latency_s")}
        self.pub["telemetry"].publish(ros.to_ros(msgs.json_msg(clean)))

    def _publish_diagnostics(self) -> None:
        now = time.monotonic()
        values = {**self.executor.stats(), "running": self.executor.running, "estop": self._estop.is_set(),
                  "instruction": self._instruction or "", "frame_age_s": now - self._frame_t, "state_age_s": now - self._state_t}
        if self.safety is not None:
            values.update({f"safety_{k}": v for k, v in self.safety.counts.items()})
        level = "warn" if self._estop.is_set() or self.executor.errors else "ok"
        msg = "e-stop latched" if self._estop.is_set() else ("running" if self.executor.running else "idle (holding)")
        self.pub["diagnostics"].publish(ros.diagnostics(self, [{"name": "vam_policy_node: executor", "level": level,
                                                                "message": msg, "values": values}]))

    def destroy_node(self) -> None:
        """Safe state: stop the executor (the driver then holds), end the control thread."""
        self._command("exit", None)
        self._control.join(10.0)
        self.executor.stop()
        if hasattr(self.policy, "close"):
            self.policy.close()
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
    rclpy.init(args=args)
    node = None
    try:
        node = VamPolicyNode()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
