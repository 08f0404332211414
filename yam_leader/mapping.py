"""The leader arm's joint mapping: which published build it is, each joint's sign and offset, and
the gripper trigger's two ends (section `yam_leader` of config/yam_leader.yaml).

A leader joint's reading becomes the follower's joint angle as

    q_follower = sign * (servo_angle - offset)            (arm joints 1..6)
    opening    = (servo_angle - gripper_squeezed) / (gripper_released - gripper_squeezed)   (gripper)

where `servo_angle` is what the leader's bus reads in radians (Dynamixel: tick 2048 = 0 rad),
`offset` is the servo angle when the follower's joint is at 0, and the gripper's opening fraction
is the follower driver's unit (0 closed, 1 open: a released trigger opens the gripper). This is
the driver schema's own `motor = direction * joint + offset` (yam_driver.config), so the mapping
is composed into the leader's bus config (`compose`): the bus then reads follower units, and
the leader's emulator (yam_driver.emulators) models a leader built this way.

Signs come with the build; they differ between the published leader builds (a wrong sign makes
the follower move mirrored once engaged):
- `gello_yam`: GELLO's YAM leader (Dynamixel servos; wuphilipp/gello_software
  configs/yam_passive.yaml @577b6c8944b9d5eac5152ff10436db4b05e8cfd7, configs/yam_auto_generated.yaml
  @038b533eaef6bbb407b4352c8edcfc9f49ee717d, configs/yam_left.yaml
  @e2a5efe6762de987e9db8077ddd48022b170fbfd: `joint_signs: [1, -1, -1, -1, 1, 1]`);
- `i2rt_passive`: i2rt's passive leader (Damiao DM4310 x4 + DM3507 x3 over CAN and a passive
  trigger encoder at CAN id 0x50E; i2rt scripts/run_gello_with_passive_encoder.py
  @5d47b358bafb30c65e397f2ece506550a0db4594: `motor_direction = [1, -1, 1, -1, 1, 1, 1]`,
  applied as (motor - offset) * direction in i2rt/motor_drivers/dm_driver.py, the same form);
- `custom`: any other build; its `signs` must be given.
Offsets are per build (per servo horn): `vam-stack leader calibrate` records them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from vam_stack.config import ConfigError, check, from_dict, load_yaml, to_dict


@dataclass(frozen=True)
class LeaderBuild:
    """A published leader-arm build: the bus it is read on and its joint signs."""

    bus: str
    signs: tuple[int, ...]
    source: str


BUILDS: dict[str, LeaderBuild] = {
    "gello_yam": LeaderBuild("dynamixel", (1, -1, -1, -1, 1, 1),
                             "GELLO's YAM leader, wuphilipp/gello_software configs/yam_passive.yaml @577b6c8"),
    "i2rt_passive": LeaderBuild("damiao", (1, -1, 1, -1, 1, 1),
                                "i2rt's passive leader, i2rt scripts/run_gello_with_passive_encoder.py @5d47b35"),
}
BUILD_NAMES = (*BUILDS, "custom")
ARM_JOINTS = 6


def _as_written(v):
    """A number as a file most likely wrote it (1, not the 1.0 it was read as)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


@dataclass(frozen=True)
class ArmMapping:
    """One leader arm: the sign and offset of each of its 6 joints and its trigger's two ends."""

    name: str                           # "left" | "right": the follower arm this leader arm drives
    offsets: tuple[float, ...]          # rad: the servo angle when the follower's joint is at 0 (6 values)
    gripper_released: float             # rad: the trigger servo's angle released (follower gripper open, 1.0)
    gripper_squeezed: float             # rad: the trigger servo's angle squeezed fully (gripper closed, 0.0)
    signs: tuple[float, ...] | None = None   # +1/-1 per joint; None = the build's (required with build: custom)

    YAML_REQUIRED = ("name", "offsets", "gripper_released", "gripper_squeezed")

    def __post_init__(self) -> None:
        where = f"yam_leader arm {self.name!r}"
        check(len(self.offsets) == ARM_JOINTS, f"{where}: offsets needs {ARM_JOINTS} values (joint1..joint6), "
                                               f"got {len(self.offsets)}: {list(self.offsets)!r}")
        for i, v in enumerate(self.offsets):
            check(math.isfinite(v), f"{where}: offsets[{i}] (joint{i + 1}) must be finite, got {v!r}")
        for key in ("gripper_released", "gripper_squeezed"):
            v = getattr(self, key)
            check(math.isfinite(v), f"{where}: {key} must be finite, got {v!r}")
        check(self.gripper_released != self.gripper_squeezed,
              f"{where}: gripper_released and gripper_squeezed are equal ({self.gripper_released!r}): "
              f"the trigger did not move between the two readings")
        if self.signs is not None:
            shown = [_as_written(s) for s in self.signs]
            check(len(self.signs) == ARM_JOINTS, f"{where}: signs needs {ARM_JOINTS} values (joint1..joint6), "
                                                 f"got {len(self.signs)}: {shown!r}")
            for i, s in enumerate(self.signs):
                check(s in (1, -1), f"{where}: signs[{i}] (joint{i + 1}) must be 1 or -1, got {_as_written(s)!r}")
            object.__setattr__(self, "signs", tuple(int(s) for s in self.signs))


@dataclass(frozen=True)
class LeaderMapping:
    """The whole leader: its build (which fixes the signs) and both arms' mappings."""

    build: str                          # gello_yam | i2rt_passive | custom (no default: the operator says which)
    arms: list[ArmMapping]              # left then right
    calibrated: str = ""                # how the offsets were found (written by `vam-stack leader calibrate`)

    YAML_REQUIRED = ("build", "arms")

    def __post_init__(self) -> None:
        check(self.build in BUILD_NAMES,
              f"yam_leader: build must be one of {list(BUILD_NAMES)} (which leader arm this is: its joint "
              f"signs differ), got {self.build!r}")
        names = [a.name for a in self.arms]
        check(names == ["left", "right"], f"yam_leader: arms must be left then right, got {names!r}")
        for arm in self.arms:
            if self.build == "custom":
                check(arm.signs is not None, f"yam_leader arm {arm.name!r}: build custom needs its signs "
                                             f"(6 values of 1 or -1)")
            elif arm.signs is not None:
                want = BUILDS[self.build].signs
                check(arm.signs == want,
                      f"yam_leader arm {arm.name!r}: signs {list(arm.signs)!r} differ from build {self.build}'s "
                      f"{list(want)!r} ({BUILDS[self.build].source}); set build: custom for another build")

    def signs(self, arm: ArmMapping) -> tuple[int, ...]:
        return arm.signs if arm.signs is not None else BUILDS[self.build].signs


def compose(mapping: LeaderMapping, bus, source: str = "yam_leader"):
    """The leader's bus config (a yam_driver DriverConfig, from `bus`: one, or the raw `yam_driver`
    mapping of a file) with the mapping as each joint's direction and offset and the trigger's ends
    as the gripper's: the bus then reads follower units. Built and validated by the driver schema
    (a servo range that leaves its single turn is refused there, naming the joint)."""
    from yam_driver.config import DriverConfig

    raw = to_dict(bus) if dataclasses.is_dataclass(bus) else dict(bus)
    if mapping.build != "custom":
        want = BUILDS[mapping.build].bus
        check(raw.get("bus") == want, f"yam_leader: build {mapping.build} is read on a {want} bus, the leader's "
                                      f"yam_driver section says bus: {raw.get('bus')} (set build: custom for another "
                                      f"build)")
    by_name = {a.name: a for a in mapping.arms}
    arms = []
    check(isinstance(raw.get("arms"), list) and all(isinstance(a, dict) for a in raw["arms"]),
          f"yam_leader: the bus's arms must be a list of mappings, got {raw.get('arms')!r}")
    for arm in raw["arms"]:
        arm = dict(arm)
        check(isinstance(arm.get("joints"), list) and all(isinstance(j, dict) for j in arm["joints"]),
              f"yam_leader: arm {arm.get('name')!r} joints must be a list of mappings, got {arm.get('joints')!r}")
        m = by_name.get(arm.get("name"))
        check(m is not None, f"yam_leader: the bus has an arm {arm.get('name')!r}, the mapping only {list(by_name)}")
        joints = [dict(j) for j in arm["joints"]]     # copies: YAML aliases share one list
        check(len(joints) == ARM_JOINTS + 1, f"yam_leader: arm {m.name!r} needs {ARM_JOINTS + 1} joints on its bus, "
                                             f"got {len(joints)}")
        for i, sign in enumerate(mapping.signs(m)):
            joints[i].update(direction=sign, offset=m.offsets[i])
        joints[ARM_JOINTS].update(direction=1, offset=0.0)
        arm.update(joints=joints, gripper_closed=m.gripper_squeezed, gripper_open=m.gripper_released)
        arms.append(arm)
    raw["arms"] = arms
    return from_dict(DriverConfig, raw, f"{source} [yam_driver]")


def load_leader(path: str | Path):
    """(LeaderMapping, the leader's bus DriverConfig with the mapping composed in) from a leader
    YAML: section `yam_leader` (the mapping) and `yam_driver` (the bus, in the follower driver's
    schema, with no direction, offset or gripper ends of its own: the mapping is their one place)."""
    data = load_yaml(path)
    for section in ("yam_leader", "yam_driver"):
        if section not in data:
            raise ConfigError(f"{path}: missing section {section!r} (see config/yam_leader.yaml)")
    mapping = from_dict(LeaderMapping, data["yam_leader"], f"{path} [yam_leader]")
    raw = data["yam_driver"]
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} [yam_driver]: expected a mapping, got {raw!r}")
    for arm in raw.get("arms") if isinstance(raw.get("arms"), list) else []:
        if not isinstance(arm, dict):
            continue                   # (compose names the malformed entry)
        doubled = [k for k in ("gripper_closed", "gripper_open") if k in arm]
        doubled += [f"{j.get('name')}.{k}" for j in (arm.get("joints") if isinstance(arm.get("joints"), list) else [])
                    if isinstance(j, dict) for k in ("direction", "offset") if k in j]
        if doubled:
            raise ConfigError(f"{path} [yam_driver]: arm {arm.get('name')!r} sets {doubled}: a leader's signs, offsets "
                              f"and trigger ends live in the yam_leader section only (one mapping, not two)")
    try:
        return mapping, compose(mapping, raw, str(path))
    except ConfigError as e:
        msg = str(e)
        raise ConfigError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
