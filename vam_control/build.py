"""Build the control loop a policy drives, from its spec and the node's parameters: the
executor's config, the safety filter (absolute joint targets) and the `PolicyRuntime`. The
policy node keeps its parameters and ROS wiring; what they build is here, once.

Absolute joint targets (the YAM): the executor runs `robot_config` at the spec's chunk, execute and
rate, every target goes through the safety filter (config/yam_safety.yaml), the joints are named as
the robot description publishes them (`vam_stack.robot`), and the filter's dims and rate must be the
policy's. (The driver node checks that its own limits sit inside the filter's: `check_layers`.) End-effector deltas (LIBERO): `libero_config` in realtime, an e-stop gate, no filter.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import SafetyFilter, load_safety_config
from vam_control.schedule import libero_config, robot_config
from vam_stack.config import ConfigError
from vam_stack.robot import load_robot
from vam_stack.topics import JOINT_TARGETS_SOURCE, LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES


@dataclass(frozen=True)
class Control:
    """What `build_runtime` built: the runtime and how its targets are named, tagged and paced (the
    policy node turns them into messages: `vam_policy_node.core.PolicyCore.target_messages`)."""

    runtime: PolicyRuntime
    action_names: tuple[str, ...]  # names of the target's values, in order (the joint states' names)
    target_source: str  # frame_id of each target: the safety filter's tag for absolute targets, "" otherwise
    period_s: float  # one control period [s]


def build_runtime(policy: Any, params: Mapping[str, Any], send: Callable[[np.ndarray], None],
                  on_telemetry: Callable[[dict], None], *, log: Any = None,
                  fit_views: Callable[..., np.ndarray] | None = None, clock: Callable[[], float] = time.monotonic,
                  stepped: bool = False, executor: Mapping[str, Any] | None = None,
                  delta_hold: np.ndarray | None = None) -> Control:
    """The runtime `policy` drives. `params` holds the policy node's parameters `rt_priority`, `rtc`,
    `max_frame_age_s`, `max_state_age_s`, `on_overrun` and `safety_config` (a resolved path;
    absolute targets only), and may hold `command_timeout_s`. Absolute targets name the joints as the robot description publishes
    them (`load_robot().published_names()`). ConfigError names a mismatch. A simulator passes its
    `clock` (runtime, executor and filter on simulated time), `stepped=True` (it runs each tick with
    `PolicyRuntime.step`), `executor` overrides of the executor's config (e.g. `mode`, `execute`) and,
    for end-effector deltas, `delta_hold` (held before the first chunk in realtime; None: zeros)."""
    s = policy.spec
    rates = {**dict(chunk=s.chunk, execute=s.execute, action_dim=s.action_dim, rate_hz=float(s.rate_hz),
                    rt_priority=params["rt_priority"], rtc=params["rtc"]), **(executor or {})}
    safety = None
    if s.action_type != "eef_delta":
        state_names = action_names = load_robot().published_names()
        safety = SafetyFilter(load_safety_config(params["safety_config"]), clock=clock)
        if (safety.cfg.dim, safety.cfg.rate_hz) != (s.action_dim, float(s.rate_hz)):
            raise ConfigError(f"safety config is for {safety.cfg.dim} dims at {safety.cfg.rate_hz} Hz, "
                              f"the policy sends {s.action_dim} at {s.rate_hz} Hz")
        ex_cfg = robot_config(**rates)
    else:
        state_names, action_names = LIBERO_PROPRIO_NAMES, list(LIBERO_ACTION_NAMES)
        ex_cfg = libero_config(**{"mode": "realtime", **rates})
    if len(action_names) != s.action_dim:
        raise ConfigError(f"{len(action_names)} joint names for a policy with {s.action_dim} actions")
    waits = {"command_timeout_s": params["command_timeout_s"]} if "command_timeout_s" in params else {}
    cfg = RuntimeConfig(params["max_frame_age_s"], params["max_state_age_s"], on_overrun=params["on_overrun"], **waits)
    runtime = PolicyRuntime(policy, ex_cfg, cfg, state_names, send, on_telemetry, safety, log=log, clock=clock,
                            fit_views=fit_views, stepped=stepped, delta_hold=delta_hold)
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
    message = "e-stop latched" if runtime.estopped else ("running" if runtime.running else "idle (holding)")
    if status["overrun"]:
        level, message = "error", "overrun: inference slower than a whole chunk, no chunk usable (holding)"
    elif status.get("safety_watchdog"):
        level, message = "error", "safety watchdog: no target reached the filter in time (holding)"
    return [{"task": "executor", "level": level, "message": message, "values": status, "hardware_id": hardware_id},
            {"task": "camera input", "level": "ok" if frames_in.count else "stale",
             "message": f"{frames_in.count} frames received", "values": frames_in.summary("frames_")}]
