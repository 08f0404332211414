"""Calibrating a leader arm: the offsets that make its reading equal the follower's pose.

Hold the leader at a pose the follower's joint angles are known for (the follower's home pose:
the folded rest, every joint 0 in the shipped driver files) and read its servo angles `m`. With the
build's signs `s`, the mapping `q = s * (m - offset)` (yam_leader.mapping) gives each offset:

    offset = m - s * q_pose

Signs cannot be found from one pose: they are the build's (check them by moving each joint,
`vam-stack joints --leader`). The trigger's two ends are its servo angles released and squeezed.
`vam-stack leader calibrate` (yam_leader.cli) reads the bus and calls these; the result is a
whole leader file (`write_leader`) for the yam_leader node's `config_file`.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import yaml

from vam_stack.config import ConfigError, load_yaml, to_dict

from .mapping import ARM_JOINTS, LeaderMapping

GRIPPER = ARM_JOINTS          # index of the gripper within an arm's 7 values


def calibrate(mapping: LeaderMapping, servo: np.ndarray, pose: np.ndarray, how: str,
              trigger: tuple[np.ndarray, np.ndarray] | None = None) -> LeaderMapping:
    """The mapping with new offsets from `servo` (14 servo angles [rad], read with the leader held
    at `pose`, 14 follower values whose grippers are ignored) and, if given, new trigger ends from
    `trigger` = (14 servo angles released, 14 squeezed; only the grippers are used)."""
    servo, pose = np.asarray(servo, np.float64), np.asarray(pose, np.float64)
    per_arm = ARM_JOINTS + 1
    if servo.shape != (2 * per_arm,) or pose.shape != (2 * per_arm,):
        raise ValueError(f"need 14 servo angles and 14 pose values, got {servo.shape} and {pose.shape}")
    arms = []
    for a, arm in enumerate(mapping.arms):
        sl = slice(a * per_arm, a * per_arm + ARM_JOINTS)
        bad = [f"{arm.name}_joint{i + 1}" for i, v in enumerate(servo[sl]) if not np.isfinite(v)]
        if bad:
            raise ValueError(f"no valid reading of {bad}: cannot calibrate")
        signs = np.asarray(mapping.signs(arm), np.float64)
        offsets = servo[sl] - signs * pose[sl]
        changes = {"offsets": tuple(round(float(v), 5) for v in offsets)}
        if trigger is not None:
            g = a * per_arm + GRIPPER
            changes.update(gripper_released=round(float(trigger[0][g]), 5),
                           gripper_squeezed=round(float(trigger[1][g]), 5))
        arms.append(dataclasses.replace(arm, **changes))
    return dataclasses.replace(mapping, arms=arms, calibrated=how)


def median_servo_angles(bus, reads: int = 5) -> np.ndarray:
    """Servo angles [rad] of every joint: the median of `reads` good reads of `bus` (a connected
    yam_driver JointBus, torque off), so one noisy reply does not become an offset."""
    rows = []
    for _ in range(reads * 4):
        r = bus.read_state()
        if r.ok.all():
            rows.append(bus.joint_map.to_motor(r.position))
            if len(rows) == reads:
                break
        time.sleep(bus.config.period_s)
    if len(rows) < reads:
        raise ConfigError(f"the leader's bus gave {len(rows)} complete readings of {reads} wanted "
                          f"in {reads * 4} tries: check its cables and ids first (vam-stack joints --leader)")
    return np.median(np.array(rows), axis=0)


def write_leader(source: str | Path, mapping: LeaderMapping, out: str | Path) -> Path:
    """A whole leader file at `out`: `source`'s yam_driver section and the new yam_leader section
    (signs written out), with a header saying where it came from."""
    data = load_yaml(source)
    section = to_dict(mapping)
    for arm, m in zip(section["arms"], mapping.arms):
        arm["signs"] = list(mapping.signs(m))
    out = Path(out)
    header = (f"# Leader arm config written by `vam-stack leader calibrate` from {source}\n"
              f"# ({mapping.calibrated}). Section yam_leader: build, signs, offsets [rad: the servo angle when\n"
              f"# the follower's joint is at 0] and the trigger's servo angle released / squeezed; section\n"
              f"# yam_driver: the leader's bus (config/yam_leader.yaml documents both).\n")
    body = yaml.safe_dump({"yam_leader": section, "yam_driver": data["yam_driver"]}, sort_keys=False,
                          default_flow_style=None, width=110)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(header + body)
    tmp.replace(out)
    return out
