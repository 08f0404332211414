"""Driver configuration: two arms x (6 joints + gripper), ids, offsets, directions, limits, gains.

Units the driver speaks ("driver units"): arm joints in radians; the gripper as an opening
fraction, 0.0 = closed, 1.0 = fully open. The gripper fraction maps linearly onto the
gripper joint angle between `gripper_closed` and `gripper_open` (radians), and every joint
angle maps onto its motor as  motor_rad = direction * joint_rad + offset.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vam_stack.config import ConfigError, check, check_within, from_yaml
from vam_stack.paths import config_dir
from vam_stack.robot import check_driver, load_robot
from vam_stack.stamps import STALE_AFTER_S

from . import damiao_protocol as dmp
from . import dxl_protocol as dxl

JOINTS_PER_ARM = load_robot().dof_per_arm  # motors per arm: 6 arm joints + the gripper (last)
NUM_ARMS = len(load_robot().arms)
BUSES = ("dynamixel", "damiao")
FAULT_ACTIONS = ("hold", "torque_off")
DAMIAO_STATE_READS = ("status_request", "mit_reply")  # how a Damiao read gets each motor's state
# gravity_factor: i2rt ships 1.0-1.2 for every arm it supports (i2rt-robotics/i2rt @ 5d47b358, robots/config/
# yam.yml, yam_pro.yml, yam_ultra.yml 1.0 1.1 1.1 1.2 1.0 1.0; big_yam.yml 1.0 1.2 1.0 1.1 1.0 1.0). A real arm
# needs that +-0.2 (a tool on the flange, a lighter build); a factor off by d pushes or sags d x tau_g / kp
# (0.13 rad at joint 2 per 1.0 on the emulated arm), so 2.0 is a typo, not an arm. 0 = feed-forward off at
# that joint (warned at start: it sags by tau_g / kp).
GRAVITY_FACTOR_RANGE = (0.8, 1.4)
DYNAMIXEL_BAUDRATES = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000, 921600, 1000000,
                       1152000, 2000000, 2500000, 3000000, 3500000, 4000000)  # dynamixel_sdk's list


@dataclass(frozen=True)
class JointConfig:
    """One motor: bus id, mapping to the joint angle, limits, slew limit, gains."""

    name: str  # joint name within its arm, e.g. "joint1" or "gripper"; published as <arm>_<name>
    id: int  # Dynamixel servo id (0..252) or Damiao CAN id (1..0x7FE) on the arm's port
    lower: float  # lower limit in driver units (rad; gripper: opening fraction)
    upper: float  # upper limit in driver units (rad; gripper: opening fraction)
    direction: int = 1  # +1 or -1: sign between joint angle and motor angle
    offset: float = 0.0  # rad: motor angle when the joint angle is zero
    max_speed: float = 1.5  # driver units per second: slew limit of commands while running
    kp: float = 0.0  # Damiao MIT stiffness Nm/rad; Dynamixel Position P gain register (0 = keep)
    kd: float = 0.0  # Damiao MIT damping Nm s/rad; Dynamixel Position D gain register (0 = keep)
    motor: str = ""  # Damiao: DM4340 | DM4310 | DM3507 (MIT ranges); Dynamixel: model checked at PING ("" = any)
    feedback_id: int = 0  # Damiao master id the motor answers on (0 = id + 0x10, i2rt's convention)

    YAML_REQUIRED = ("name", "id", "lower", "upper", "max_speed")  # limits never default silently

    def __post_init__(self) -> None:
        check(bool(self.name), f"joint name must not be empty, got {self.name!r}")
        check(0 <= self.id <= 0x7FE, f"joint {self.name!r}: id {self.id!r} outside 0..0x7FE")
        check(self.direction in (1, -1), f"joint {self.name!r}: direction must be 1 or -1, got {self.direction!r}")
        for key in ("lower", "upper", "offset", "max_speed", "kp", "kd"):
            v = getattr(self, key)
            check(math.isfinite(v), f"joint {self.name!r}: {key} must be finite, got {v!r}")
        check(self.lower < self.upper, f"joint {self.name!r}: lower {self.lower!r} must be < upper {self.upper!r}")
        check(self.max_speed > 0, f"joint {self.name!r}: max_speed must be > 0, got {self.max_speed!r}")
        check(self.kp >= 0 and self.kd >= 0, f"joint {self.name!r}: kp/kd must be >= 0, got {self.kp!r}/{self.kd!r}")
        check(0 <= self.feedback_id <= 0x7FE, f"joint {self.name!r}: feedback_id {self.feedback_id!r} out of range")


@dataclass(frozen=True)
class ArmConfig:
    """One arm: its port and its 7 joints (6 + gripper), with the gripper's angle range."""

    name: str  # "left" or "right": prefix of the joint names
    port: str  # Dynamixel: serial device (e.g. /dev/ttyUSB0); Damiao: CAN channel (e.g. can_left)
    joints: list[JointConfig]  # exactly 7, in order joint1..joint6 then the gripper
    gripper_closed: float = 0.0  # rad: gripper joint angle at opening fraction 0
    gripper_open: float = 1.0  # rad: gripper joint angle at opening fraction 1

    def __post_init__(self) -> None:
        check(bool(self.name), f"arm name must not be empty, got {self.name!r}")
        check(
            len(self.joints) == JOINTS_PER_ARM,
            f"arm {self.name!r}: expected {JOINTS_PER_ARM} joints (6 + gripper), got {len(self.joints)}: "
            f"{[j.name for j in self.joints]}",
        )
        names = [j.name for j in self.joints]
        check(len(set(names)) == len(names), f"arm {self.name!r}: duplicate joint names {names}")
        check(self.gripper_closed != self.gripper_open,
              f"arm {self.name!r}: gripper_closed and gripper_open are equal ({self.gripper_open!r})")
        g = self.joints[-1]
        check(0.0 <= g.lower < g.upper <= 1.0,
              f"arm {self.name!r}: gripper limits are an opening fraction within [0, 1], got [{g.lower}, {g.upper}]")


@dataclass(frozen=True)
class DriverConfig:
    """The whole driver: bus kind, both arms, loop rate, safety timings, bus timings."""

    bus: str  # "dynamixel" (Protocol 2.0 servos) or "damiao" (DM43xx over CAN, what the YAM uses)
    arms: list[ArmConfig]  # exactly 2: left then right (14 joints in that order)
    rate_hz: float | None = None  # control loop rate [Hz]; None: the robot's (config/yam_robot.yaml rate_hz, its
    #                               one source); a file may state its own loop rate (tests run slower loops)
    watchdog_s: float = STALE_AFTER_S  # targets older than this are stale -> hold (6 ticks at 30 Hz)
    ramp_speed_scale: float = 0.25  # start-up/resume ramp speed as a fraction of each joint's max_speed
    ramp_tolerance: float = 0.005  # driver units: ramp is done when every joint is this close
    fault_after_failures: int = 3  # consecutive ticks without a valid reply that latch a joint fault
    on_fault: str = "hold"  # "hold" (keep every healthy joint where it is) or "torque_off"
    torque_off_on_exit: bool = True  # after the final hold, disable torque (the arm may sag)
    io_budget_fraction: float = 0.7  # share of one period that read + write (with retries) may use
    reply_timeout_ms: float = 4.0  # wait for one reply before retrying (USB-serial/CAN round trip)
    max_retries: int = 2  # extra request rounds per read/write for motors that did not answer
    connect_retries: int = 3  # attempts per motor when checking the bus at connect
    baudrate: int = 1_000_000  # Dynamixel baud rate (the SDK accepts only its listed rates)
    can_interface: str = "socketcan"  # python-can interface; tests use "virtual"
    can_bitrate: int = 1_000_000  # CAN bit rate (YAM/i2rt: 1 Mbit/s)
    damiao_state_read: str = "status_request"  # Damiao: how read_state gets each motor's state: "status_request"
    #   (0x7FF/0xCC per motor, Damiao's DM_CAN library; commands nothing) or "mit_reply" (the reply to an MIT frame
    #   that re-sends the motor's last command, i2rt's way; for firmware that ignores 0xCC, which connect detects)
    damiao_check_registers: bool = True  # Damiao: at connect read PMAX/VMAX/TMAX from every motor and refuse one
    #   that differs from its motor type's table or does not answer; false trusts the table unread (firmware
    #   without register reads; a motor scaled differently then reads and moves wrongly)
    log_every_s: float = 5.0  # how often the loop logs its achieved rate
    stats_window: int = 1000  # ticks kept for p50/p99 timing statistics
    # hardware that lies: what the driver checks every tick
    max_tracking_error: float = 0.35  # rad: an arm joint this far from its command for `tracking_error_ticks`
    #   ticks in a row latches a fault (a motor that lost torque sags or lags); grippers are exempt: a
    #   grasp holds them off their command by design
    tracking_error_ticks: int = 5  # consecutive ticks over `max_tracking_error` before the fault (~0.17 s)
    reading_speed_factor: float = 1.5  # a reading that moved more than this x the joint's speed ceiling
    #   (config/yam_robot.yaml) over the time since the last plausible reading (+ `reading_margin`) is
    #   refused as a glitch: counted as a failed read, never used as a position or a hold target
    reading_margin: float = 0.02  # driver units added to the glitch bound (quantisation, sensor noise)
    torque_check_period_s: float = 0.1  # Dynamixel: read Torque Enable this often (Damiao reports it in
    #   every feedback frame); a motor that is off while the driver holds torque is a fault at once
    home_pose: tuple[float, ...] | None = None  # 14 driver-unit values the `home` service drives to at the
    #   ramp speed (ramp_speed_scale x max_speed); None: no home pose, the service refuses
    # what the arm needs from each MIT command (Damiao; yam_driver/gravity.py, i2rt's motor_chain_robot.py)
    gravity_factor: tuple[float, ...] | None = None  # per arm joint 1-6: x the model's gravity torque at the
    #   measured pose, sent as each MIT command's feed-forward (i2rt yam.yml gravity_comp_factor). Required on
    #   bus damiao; each in GRAVITY_FACTOR_RANGE [0.8, 1.4] or 0 (off at that joint; warned at start, naming it:
    #   it sags by tau_g / kp); all zeros switches feed-forward off
    gripper_force_limit: float = 50.0  # N: the most a blocked gripper squeezes (i2rt get_robot.py
    #   limit_gripper_force 50); the driver keeps a stalled gripper's command within force -> torque / kp of
    #   the measured opening (Damiao; 0 = no limit, warned). Motor torque = force x gripper_stroke / motor stroke
    gripper_stroke: float = 0.096  # m: finger gap from closed to open (i2rt linear_4310.yml gripper_stroke)
    gripper_stall_speed: float = 0.3  # motor rad/s: a gripper slower than this counts as blocked (i2rt
    #   linear_4310.yml clog_speed_threshold)

    # safety-relevant timings a driver file states explicitly (no silent default)
    YAML_REQUIRED = ("bus", "arms", "watchdog_s", "ramp_speed_scale", "ramp_tolerance", "on_fault")

    def __post_init__(self) -> None:
        check(self.bus in BUSES, f"bus must be one of {BUSES}, got {self.bus!r}")
        check(len(self.arms) == NUM_ARMS,
              f"expected {NUM_ARMS} arms (left, right), got {len(self.arms)}: {[a.name for a in self.arms]}")
        check(len({a.name for a in self.arms}) == NUM_ARMS, f"arm names must differ, got {[a.name for a in self.arms]}")
        if self.rate_hz is None:
            object.__setattr__(self, "rate_hz", load_robot().rate_hz)
        check(self.rate_hz > 0 and math.isfinite(self.rate_hz), f"rate_hz must be > 0, got {self.rate_hz!r}")
        check(self.watchdog_s > 0, f"watchdog_s must be > 0, got {self.watchdog_s!r}")
        check(0 < self.ramp_speed_scale <= 1, f"ramp_speed_scale must be in (0, 1], got {self.ramp_speed_scale!r}")
        check(self.ramp_tolerance > 0, f"ramp_tolerance must be > 0, got {self.ramp_tolerance!r}")
        check(self.fault_after_failures >= 1, f"fault_after_failures must be >= 1, got {self.fault_after_failures!r}")
        check(self.on_fault in FAULT_ACTIONS, f"on_fault must be one of {FAULT_ACTIONS}, got {self.on_fault!r}")
        check(0 < self.io_budget_fraction <= 1, f"io_budget_fraction must be in (0, 1], got {self.io_budget_fraction!r}")
        check(self.reply_timeout_ms > 0, f"reply_timeout_ms must be > 0, got {self.reply_timeout_ms!r}")
        check(self.max_retries >= 0, f"max_retries must be >= 0, got {self.max_retries!r}")
        check(self.connect_retries >= 1, f"connect_retries must be >= 1, got {self.connect_retries!r}")
        check(self.damiao_state_read in DAMIAO_STATE_READS,
              f"damiao_state_read must be one of {DAMIAO_STATE_READS}, got {self.damiao_state_read!r}")
        check(isinstance(self.damiao_check_registers, bool),
              f"damiao_check_registers must be true or false, got {self.damiao_check_registers!r}")
        check(self.baudrate in DYNAMIXEL_BAUDRATES,
              f"baudrate must be one the Dynamixel SDK accepts {DYNAMIXEL_BAUDRATES}, got {self.baudrate!r}")
        check(self.stats_window >= 10, f"stats_window must be >= 10, got {self.stats_window!r}")
        check_within("ramp_tolerance", self.ramp_tolerance, 1e-5, 0.1, "driver units",
                     "larger ends the start ramp before the arm reaches its first target")
        check_within("reply_timeout_ms", self.reply_timeout_ms, 0.1, 1000.0 * self.period_s, "ms", "one control period")
        check_within("log_every_s", self.log_every_s, 0.1, 3600.0, "s")
        check_driver(self)             # rate, watchdog, names, limits and speeds against the robot description
        if self.home_pose is not None:
            check(len(self.home_pose) == len(self.joint_names) and all(
                  isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.home_pose),
                  f"home_pose must be {len(self.joint_names)} finite numbers (driver units), got {self.home_pose!r}")
            outside = [f"{n}={v}" for n, v, (_, j) in zip(self.joint_names, self.home_pose, self.joints)
                       if not j.lower <= v <= j.upper]
            check(not outside, f"home_pose outside the joint limits: {outside}")
        check_within("connect_retries", self.connect_retries, 1, 20, "attempts", "start-up must end")
        check_within("max_retries", self.max_retries, 0, 20, "rounds")
        check_within("max_tracking_error", self.max_tracking_error, 0.02, 1.0, "rad",
                     "larger lets a motor that lost torque sag unnoticed")
        check_within("tracking_error_ticks", self.tracking_error_ticks, 1, max(1, int(self.rate_hz)), "ticks",
                     "one second")
        check_within("reading_speed_factor", self.reading_speed_factor, 1.0, 10.0, "x the speed ceiling",
                     "larger takes a glitched reading as a position")
        check_within("reading_margin", self.reading_margin, 0.0, 0.2, "driver units")
        check_within("torque_check_period_s", self.torque_check_period_s, self.period_s, 1.0, "s",
                     "a motor without torque must be noticed within a second")
        check_within("gripper_force_limit", self.gripper_force_limit, 0.0, 200.0, "N",
                     "the linear gripper's motor saturates near 500 N")
        check_within("gripper_stroke", self.gripper_stroke, 0.01, 0.5, "m")
        check_within("gripper_stall_speed", self.gripper_stall_speed, 0.01, 10.0, "motor rad/s")
        if self.gravity_factor is not None:
            self._check_gravity_factor()
        self._check_ids()
        if self.bus == "damiao":
            self._check_damiao()
        else:
            self._check_dynamixel()

    def _check_gravity_factor(self) -> None:
        object.__setattr__(self, "gravity_factor", tuple(self.gravity_factor))
        n, (lo, hi) = JOINTS_PER_ARM - 1, GRAVITY_FACTOR_RANGE
        check(len(self.gravity_factor) == n and all(
              isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.gravity_factor),
              f"gravity_factor must be {n} numbers (one per arm joint 1-6), got {self.gravity_factor!r}")
        bad = [f"joint{k + 1}: {v!r}" for k, v in enumerate(self.gravity_factor) if v != 0 and not lo <= v <= hi]
        check(not bad, f"gravity_factor {', '.join(bad)} outside [{lo}, {hi}] (or 0 = off at that joint): i2rt uses "
                       f"1.0-1.2 on every YAM; a factor off by d pushes the joint by d x tau_g / kp (~0.13 rad at "
                       f"joint 2 per 1.0), so this would push the arm off its command (got {self.gravity_factor!r})")

    def _check_ids(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for arm in self.arms:
            for j in arm.joints:
                ids = [j.id] if self.bus == "dynamixel" else [j.id, self.feedback_id(j)]
                for i in ids:
                    key = (arm.port, i)
                    check(key not in seen,
                          f"id {i} used twice on port {arm.port!r}: {seen.get(key)} and {arm.name}_{j.name}")
                    seen[key] = f"{arm.name}_{j.name}"

    def _check_damiao(self) -> None:
        check(self.gravity_factor is not None,
              "bus damiao needs gravity_factor (6 numbers, i2rt's are 1.0 1.1 1.1 1.2 1.0 1.0): without gravity "
              "feed-forward a YAM sags by tau_g / kp; all zeros switches it off explicitly")
        for arm in self.arms:
            for j in arm.joints:
                where = f"{arm.name}_{j.name}"
                check(j.motor in dmp.MOTOR_LIMITS,
                      f"{where}: motor must be one of {sorted(dmp.MOTOR_LIMITS)}, got {j.motor!r}")
                check(1 <= j.id <= 0x7FE and j.id != dmp.STATUS_REQUEST_ID,
                      f"{where}: Damiao CAN id {j.id!r} out of range")
                lim = dmp.MOTOR_LIMITS[j.motor].p_max
                lo, hi = motor_range(arm, j)
                check(-lim <= lo and hi <= lim,
                      f"{where}: motor range [{lo:.3f}, {hi:.3f}] rad exceeds the MIT range +-{lim}")
                check(j.kp <= dmp.KP_RANGE[1] and j.kd <= dmp.KD_RANGE[1],
                      f"{where}: kp {j.kp!r} / kd {j.kd!r} exceed MIT ranges {dmp.KP_RANGE}/{dmp.KD_RANGE}")

    def _check_dynamixel(self) -> None:
        check(self.gravity_factor is None,
              f"gravity_factor {self.gravity_factor!r} given for bus dynamixel: Protocol 2.0 position control has no "
              "torque feed-forward (remove it)")
        for arm in self.arms:
            for j in arm.joints:
                where = f"{arm.name}_{j.name}"
                check(j.id <= 252, f"{where}: Dynamixel id {j.id!r} must be <= 252")
                check(j.motor == "" or j.motor in dxl.MODEL_NUMBERS,
                      f"{where}: unknown Dynamixel model {j.motor!r}; known: {sorted(dxl.MODEL_NUMBERS)}")
                lo, hi = motor_range(arm, j)
                check(-math.pi <= lo and hi < math.pi,
                      f"{where}: motor range [{lo:.3f}, {hi:.3f}] rad leaves the single-turn range [-pi, pi)")

    def feedback_id(self, joint: JointConfig) -> int:
        return joint.feedback_id or joint.id + dmp.DEFAULT_MASTER_OFFSET

    @property
    def joint_names(self) -> list[str]:
        return [f"{a.name}_{j.name}" for a in self.arms for j in a.joints]

    @property
    def joints(self) -> list[tuple[ArmConfig, JointConfig]]:
        return [(a, j) for a in self.arms for j in a.joints]

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


def is_gripper(arm: ArmConfig, joint: JointConfig) -> bool:
    return joint is arm.joints[-1]


def motor_range(arm: ArmConfig, joint: JointConfig) -> tuple[float, float]:
    """Motor-angle interval (rad) that the joint's limits map onto."""
    if is_gripper(arm, joint):
        ends = [arm.gripper_closed + f * (arm.gripper_open - arm.gripper_closed) for f in (joint.lower, joint.upper)]
    else:
        ends = [joint.lower, joint.upper]
    m = [joint.direction * e + joint.offset for e in ends]
    return min(m), max(m)


@dataclass
class JointMap:
    """Vectorised driver-unit <-> motor-radian conversion for all 14 joints."""

    direction: np.ndarray = field(repr=False)  # (14,)
    offset: np.ndarray = field(repr=False)  # (14,)
    scale: np.ndarray = field(repr=False)  # (14,) joint rad per driver unit (1 except grippers)
    base: np.ndarray = field(repr=False)  # (14,) joint rad at driver value 0 (0 except grippers)
    lower: np.ndarray = field(repr=False)  # (14,) driver units
    upper: np.ndarray = field(repr=False)  # (14,) driver units

    @classmethod
    def from_config(cls, cfg: DriverConfig) -> "JointMap":
        rows = []
        for arm, j in cfg.joints:
            if is_gripper(arm, j):
                scale, base = arm.gripper_open - arm.gripper_closed, arm.gripper_closed
            else:
                scale, base = 1.0, 0.0
            rows.append((j.direction, j.offset, scale, base, j.lower, j.upper))
        cols = np.asarray(rows, dtype=np.float64).T  # (6, 14)
        return cls(*cols)

    def to_motor(self, value: np.ndarray) -> np.ndarray:
        return self.direction * (self.base + self.scale * value) + self.offset

    def to_driver(self, motor_rad: np.ndarray) -> np.ndarray:
        return ((motor_rad - self.offset) * self.direction - self.base) / self.scale

    def velocity_to_driver(self, motor_rad_s: np.ndarray) -> np.ndarray:
        return motor_rad_s * self.direction / self.scale

    def clip(self, value: np.ndarray) -> np.ndarray:
        return np.clip(value, self.lower, self.upper)


def default_config_path(bus: str) -> Path:
    """config/yam_driver_<bus>.yaml of the source checkout or install."""
    if bus not in BUSES:
        raise ConfigError(f"bus must be one of {BUSES}, got {bus!r}")
    return config_dir() / f"yam_driver_{bus}.yaml"


def load_config(path: str | Path | None = None, bus: str = "damiao") -> DriverConfig:
    """Load the `yam_driver` section of `path` (default: the shipped file for `bus`)."""
    return from_yaml(DriverConfig, path or default_config_path(bus), "yam_driver")
