"""`MujocoBus`: the driver's joint bus on top of the simulator (targets in, joint state out).

It speaks exactly what the Damiao and Dynamixel buses speak: motor radians below the
driver's `JointMap` (so directions, offsets, limits and the gripper's angle range of the
driver configuration apply unchanged), with each MIT command's gains (the driver
configuration's kp/kd, set at connect) and feed-forward torque driving the simulated motors'
law (sim.py), clipped targets, `written` = what reached the
actuators, per-joint `ok`/`errors`, torque on/off. The gripper's motor angle maps linearly
onto the finger rail: `gripper_closed` -> 0 m, `gripper_open` -> FINGER_TRAVEL.

Fault switches for tests and demos, like the emulators': `silent` joints (no reply: ok False
and an error, so the driver's failure counter latches a fault), `hardware_error` joints (the
motor reports an error flag), `fail_connect` (a motor missing at connect).
"""
from __future__ import annotations

import numpy as np

from yam_driver.bus import BusError, BusMismatchError, BusReading, JointBus, WriteResult
from yam_driver.config import DriverConfig

from yam_driver.arm_model import FINGER_TRAVEL
from .sim import N_MOTORS, YamSim


class MujocoBus(JointBus):
    """A `JointBus` whose motors are the simulator's actuators."""

    def __init__(self, config: DriverConfig, sim: YamSim):
        super().__init__(config)
        if self.n != N_MOTORS:
            raise BusMismatchError(f"the simulated YAM has {N_MOTORS} motors, the driver config names {self.n}")
        self.sim = sim
        self.gripper = np.zeros(self.n, bool)
        self.gripper[[6, 13]] = True
        self.silent: set[int] = set()  # fault switch: joints that stop answering
        self.hardware_error: set[int] = set()  # fault switch: joints whose replies carry an error flag
        self.fail_connect: set[int] = set()  # fault switch: joints missing at connect
        self.reads = self.writes = 0

    # --- unit conversion: driver units <-> simulator units --------------------------------
    def _driver_to_sim(self, value: np.ndarray) -> np.ndarray:
        return np.where(self.gripper, value * FINGER_TRAVEL, value)

    def _sim_to_driver(self, value: np.ndarray) -> np.ndarray:
        return np.where(self.gripper, value / FINGER_TRAVEL, value)

    def _driver_velocity_to_motor(self, v: np.ndarray) -> np.ndarray:
        jm = self.joint_map
        return v * jm.scale * jm.direction

    # --- interface ----------------------------------------------------------------------
    def connect(self) -> None:
        if self.connected:
            return
        if self.fail_connect:
            missing = sorted(self.joint_names[i] for i in self.fail_connect)
            raise BusMismatchError(f"simulated motors did not answer at connect: {missing}")
        self.sim.set_torque(False)  # motors come up with torque off, as real ones do
        jm = self.joint_map
        kp = np.array([j.kp for _, j in self.config.joints])
        kd = np.array([j.kd for _, j in self.config.joints])
        self.sim.configure_motors(kp, kd, np.abs(jm.scale[self.gripper]))  # the gains each MIT frame carries
        self.torque_enabled = False
        self.connected = True

    def read_state(self, deadline: float | None = None, mask: np.ndarray | None = None) -> BusReading:
        if not self.connected:
            raise BusError("read_state called on a bus that is not connected")
        mask = np.ones(self.n, bool) if mask is None else np.asarray(mask, bool)
        self.sim.sync()
        pos, vel, eff = self.sim.state()
        driver_pos, driver_vel = self._sim_to_driver(pos), self._sim_to_driver(vel)
        jm = self.joint_map
        ok = mask.copy()
        errors = {}
        for i in self.silent:
            if mask[i]:
                ok[i] = False
                errors[i] = "no reply (simulated fault)"
        hw = np.zeros(self.n, bool)
        for i in self.hardware_error:
            if mask[i]:
                hw[i] = True
                errors[i] = "hardware error flag (simulated fault)"
        self.reads += 1
        return self._reading_from_motor(jm.to_motor(driver_pos), self._driver_velocity_to_motor(driver_vel),
                                        eff, ok, hw, errors, 0)

    def _write(self, motor_rad: np.ndarray, mask: np.ndarray, deadline: float,
               torque_ff: np.ndarray | None = None) -> WriteResult:
        mask = mask.copy()
        errors = {}
        for i in self.silent:
            if mask[i]:
                mask[i] = False
                errors[i] = "no reply to the write (simulated fault)"
        driver = self.joint_map.to_driver(motor_rad)
        joint_ff = None if torque_ff is None else torque_ff * self.joint_map.direction   # motor Nm -> joint Nm
        self.sim.set_targets(self._driver_to_sim(driver), mask, torque_ff=joint_ff)
        self.writes += 1
        hw = np.zeros(self.n, bool)
        hw[list(i for i in self.hardware_error if mask[i])] = True
        return WriteResult(np.where(mask, motor_rad, np.nan), errors, 0, hw)

    def enable(self) -> None:
        if not self.connected:
            raise BusError("enable called on a bus that is not connected")
        self.sim.set_torque(True)
        self.torque_enabled = True

    def disable(self) -> dict[int, str]:
        self.sim.set_torque(False)
        self.torque_enabled = False
        return {}

    def _close_ports(self) -> None:
        return None  # the simulator belongs to its owner; nothing to release here
