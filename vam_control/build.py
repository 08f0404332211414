"""Build the control loop a policy drives, from its spec and the node's parameters: the
executor's config, the safety filter (absolute joint targets) and the `PolicyRuntime`. The
policy node keeps its parameters and ROS wiring; what they build is here, once.

Absolute joint targets (the YAM): the executor runs `robot_config` at the spec's chunk, execute and
rate, every target goes through the safety filter (config/yam_safety.yaml), the driver's limits
must sit inside the filter's (`vam_stack.robot.check_layers`), and the filter's dims and rate must
be the policy's. End-effector deltas (LIBERO): `libero_config` in realtime, an e-stop gate, no filter.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import SafetyFilter, load_safety_config
from vam_control.schedule import libero_config, robot_config
from vam_stack import msgs
from vam_stack.config import ConfigError
from vam_stack.robot import check_layers
from vam_stack.topics import JOINT_TARGETS_SOURCE, LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES


@dataclass(frozen=True)
class Control:
    """What `build_runtime` built: the runtime and how its targets are named, tagged and sent."""

    runtime: PolicyRuntime
    action_names: tuple[str, ...]  # names of the target's values, in order (the joint states' names)
    target_source: str  # frame_id of each target: the safety filter's tag for absolute targets, "" otherwise
    period_s: float  # one control period [s]

    def target_messages(self, sent: np.ndarray, stamp: Any, outputs: Sequence[str] = ()) -> list[tuple[str, Any]]:
        """(output, message) for one target: /vam/joint_targets, and for ros2_control the `outputs`
        asked for (joint_trajectory: a one-point trajectory reached one period later; forward_commands)."""
        names = list(self.action_names)
        out = [("joint_targets", msgs.joint_state_msg(names, sent, stamp_s=stamp, frame_id=self.target_source))]
        if "joint_trajectory" in outputs:
            out.append(("joint_trajectory", msgs.joint_trajectory_msg(names, sent[None], [self.period_s], stamp,
                                                                      self.target_source)))
        if "forward_commands" in outputs:
            out.append(("forward_commands", msgs.float64_array_msg(sent)))
        return out


def build_runtime(policy: Any, params: Mapping[str, Any], send: Callable[[np.ndarray], None],
                  on_telemetry: Callable[[dict], None], *, driver: Any = None, log: Any = None,
                  fit_views: Callable[..., np.ndarray] | None = None) -> Control:
    """The runtime `policy` drives. `params` holds the policy node's parameters `rt_priority`, `rtc`,
    `max_frame_age_s`, `max_state_age_s`, `on_overrun` and `safety_config` (a resolved path;
    absolute targets only); `driver` is the driver config naming the joints (absolute targets
    only, yam_driver.config.DriverConfig). ConfigError names a mismatch."""
    s = policy.spec
    rates = dict(chunk=s.chunk, execute=s.execute, action_dim=s.action_dim, rate_hz=float(s.rate_hz),
                 rt_priority=params["rt_priority"], rtc=params["rtc"])
    safety = None
    if s.action_type != "eef_delta":
        if driver is None:
            raise ConfigError("absolute joint targets need the driver config (the joints' names)")
        state_names = action_names = list(driver.joint_names)
        safety = SafetyFilter(load_safety_config(params["safety_config"]))
        check_layers(driver, safety.cfg)   # the driver's limits sit inside the filter's
        if (safety.cfg.dim, safety.cfg.rate_hz) != (s.action_dim, float(s.rate_hz)):
            raise ConfigError(f"safety config is for {safety.cfg.dim} dims at {safety.cfg.rate_hz} Hz, "
                              f"the policy sends {s.action_dim} at {s.rate_hz} Hz")
        ex_cfg = robot_config(**rates)
    else:
        state_names, action_names = LIBERO_PROPRIO_NAMES, list(LIBERO_ACTION_NAMES)
        ex_cfg = libero_config(mode="realtime", **rates)
    if len(action_names) != s.action_dim:
        raise ConfigError(f"{len(action_names)} joint names for a policy with {s.action_dim} actions")
    cfg = RuntimeConfig(params["max_frame_age_s"], params["max_state_age_s"], on_overrun=params["on_overrun"])
    runtime = PolicyRuntime(policy, ex_cfg, cfg, state_names, send, on_telemetry, safety, log=log, fit_views=fit_views)
    # absolute targets carry the filter's tag: the driver follows nothing else (yam_driver.command_gate)
    return Control(runtime, tuple(action_names), JOINT_TARGETS_SOURCE if safety is not None else "",
                   1.0 / float(s.rate_hz))


def release(runtime: PolicyRuntime | None, policy: Any, budget_s: float) -> bool:
    """Stop at once: no further target (the driver holds the last one), the policy closed (a replan in
    flight is abandoned, its child process ends), the runtime's threads joined. False when that is
    not done within `budget_s`: the caller goes on without waiting (the threads are daemons)."""
    def stop() -> None:
        if runtime is not None:
            runtime.begin_close()
        if policy is not None and hasattr(policy, "close"):
            policy.close()
        if runtime is not None:
            runtime.close(budget_s / 2)
    stopping = threading.Thread(target=stop, name="policy-release", daemon=True)
    stopping.start()
    stopping.join(budget_s)
    return not stopping.is_alive()


def diagnostics(runtime: PolicyRuntime | None, extra: Mapping[str, Any], estop_latched: bool, hardware_id: str,
                frames_in: Any) -> list[dict]:
    """The policy's /diagnostics statuses (task, level, message, values): the executor's
    (`runtime.status()` and `extra`) and, once a runtime exists, the camera input's (`frames_in`, an
    `ArrivalStats`)."""
    if runtime is None:
        return [{"task": "executor", "level": "stale", "message": "not configured (no policy)",
                 "values": {"estop": estop_latched}}]
    status = {**runtime.status(), **extra}
    level = "warn" if runtime.estopped or runtime.executor.errors else "ok"
    message = "e-stop latched" if runtime.estopped else ("running" if runtime.executor.running else "idle (holding)")
    if status["overrun"]:
        level, message = "error", "overrun: inference slower than a whole chunk, no chunk usable (holding)"
    elif status.get("safety_watchdog"):
        level, message = "error", "safety watchdog: no target reached the filter in time (holding)"
    return [{"task": "executor", "level": level, "message": message, "values": status, "hardware_id": hardware_id},
            {"task": "camera input", "level": "ok" if frames_in.count else "stale",
             "message": f"{frames_in.count} frames received", "values": frames_in.summary("frames_")}]
