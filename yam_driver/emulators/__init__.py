"""Emulated YAM buses for tests, benchmarks and demos (no hardware needed).

`EmulatedRig(config)` starts one emulator per port the config names (a pty with Dynamixel
servos, or a virtual CAN channel with Damiao motors), and exposes `rig.config`: the same
configuration with ports pointing at the emulators (and, for Damiao, python-can's
"virtual" interface). Faults are injected by joint name.

Damiao load model (`load_fn`, rig level, in driver units): `load_fn(q)` gets the (14,) joint
positions in driver units (radians; grippers as opening fraction, the order of
`config.joint_names`) and returns (14,) external joint torques in Nm (gravity; positive pushes
the joint angle positive), the same joint-space convention as `write_targets(torque_ff=...)`.
The rig converts them to motor Nm (x direction) per emulator; each emulator's callback sees the
positions of its own channel fresh and the other channel's as last seen (so the two channels'
emulator threads never wait on each other).
"""
from __future__ import annotations

import dataclasses
import os
import uuid

import numpy as np

from typing import Callable

from ..can_socket import INTERFACE, ListeningCanBus
from ..config import DriverConfig, JointMap
from ..dxl_protocol import ADDR_TORQUE_ENABLE
from .damiao_emulator import DamiaoEmulator, EmulatedMotor
from .dynamixel_emulator import DynamixelEmulator
from .faults import HARDWARE_ERRORS, FaultInjector

__all__ = ["EmulatedRig", "DamiaoEmulator", "DynamixelEmulator", "EmulatedMotor", "FaultInjector",
           "HARDWARE_ERRORS"]


class EmulatedRig:
    """Emulators for every port of `config`; a context manager that stops them on exit."""

    def __init__(self, config: DriverConfig, initial: np.ndarray | None = None, tau_s: float = 0.02,
                 skip_ids: dict[str, list[int]] | None = None, can_timeout_s: float | None = None,
                 answer_status_request: bool = True, answer_registers: bool = True,
                 load_fn: Callable[[np.ndarray], np.ndarray] | None = None, listen_dir: str | None = None,
                 cpus: tuple[int, ...] = ()):
        """`initial`: (14,) start positions in driver units (default: mid-range of each joint).
        `skip_ids`: arm name -> ids left off the emulated bus (to test config mismatches).
        Damiao only: `can_timeout_s`, the motors' own command timeout (None = off);
        `answer_status_request` False: firmware that ignores the 0xCC status request;
        `answer_registers` False: firmware that does not answer register reads;
        `load_fn`: the external torque model (module docstring; None = no load);
        `listen_dir`: each channel is a Unix socket in this folder (`yam_driver.can_socket`), for a rig
        in a process of its own (`emulators.process`); None: python-can's in-process virtual channels;
        `cpus` (with `listen_dir`): each channel answered by one thread pinned to each of these CPUs."""
        jm = JointMap.from_config(config)
        self.joint_map = jm
        if initial is None:
            initial = (jm.lower + jm.upper) / 2.0
        initial = np.asarray(initial, np.float64)
        if initial.shape != (len(config.joint_names),):
            raise ValueError(f"initial must have shape ({len(config.joint_names)},), got {initial.shape}")
        motor0 = jm.to_motor(initial)
        skip_ids = skip_ids or {}
        self.emulators: dict[str, DynamixelEmulator | DamiaoEmulator] = {}  # by original port
        self._where: dict[str, tuple[str, int]] = {}  # joint name -> (original port, motor id)
        groups: dict[str, list[tuple[int, object, object]]] = {}
        for idx, (arm, joint) in enumerate(config.joints):
            groups.setdefault(arm.port, []).append((idx, arm, joint))
            self._where[f"{arm.name}_{joint.name}"] = (arm.port, joint.id)
        new_port: dict[str, str] = {}
        self._q_motor = np.asarray(motor0, np.float64).copy()   # last seen motor angles (load model)
        try:
            for port, members in groups.items():
                keep = [(i, a, j) for i, a, j in members if j.id not in skip_ids.get(a.name, [])]
                if config.bus == "dynamixel":
                    from ..dynamixel_bus import rad_to_ticks

                    ticks = {j.id: int(rad_to_ticks(np.array([motor0[i]]))[0]) for i, _, j in keep}
                    from ..dxl_protocol import MODEL_NUMBERS

                    models = {MODEL_NUMBERS[j.motor] for _, _, j in keep if j.motor}   # one model per chain
                    kw = {"model_number": models.pop()} if len(models) == 1 else {}
                    emu = DynamixelEmulator([j.id for _, _, j in keep], tau_s=tau_s, initial_ticks=ticks, **kw)
                    new_port[port] = emu.port_name
                else:
                    channel = f"vam-{uuid.uuid4().hex[:8]}-{port}"
                    bus = None
                    if listen_dir is not None:
                        channel = os.path.join(listen_dir, port)
                        bus = ListeningCanBus(channel)
                    motors = [EmulatedMotor(j.id, config.feedback_id(j), j.motor, position=float(motor0[i]),
                                            target=float(motor0[i])) for i, _, j in keep]
                    emu = DamiaoEmulator(channel, motors, tau_s=tau_s, can_timeout_s=can_timeout_s,
                                         answer_status_request=answer_status_request,
                                         answer_registers=answer_registers,
                                         load_fn=None if load_fn is None else self._emulator_load(
                                             load_fn, [(i, j.id) for i, _, j in keep]), bus=bus,
                                         cpus=cpus if listen_dir is not None else ())
                    new_port[port] = channel
                self.emulators[port] = emu.start()
        except BaseException:
            self.stop()
            raise
        arms = [dataclasses.replace(a, port=new_port[a.port]) for a in config.arms]
        extra = {"can_interface": "virtual" if listen_dir is None else INTERFACE} if config.bus == "damiao" else {}
        self.config = dataclasses.replace(config, arms=arms, **extra)
        self.joint_map = jm

    def _emulator_load(self, load_fn: Callable[[np.ndarray], np.ndarray],
                       members: list[tuple[int, int]]) -> Callable[[dict[int, float]], dict[int, float]]:
        """One emulator's load callback (motor ids, motor Nm) from the rig-level `load_fn`."""
        def per_emulator(positions: dict[int, float]) -> dict[int, float]:
            for idx, motor_id in members:
                if motor_id in positions:
                    self._q_motor[idx] = positions[motor_id]
            tau = np.asarray(load_fn(self.joint_map.to_driver(self._q_motor)), np.float64)
            if tau.shape != self._q_motor.shape:
                raise ValueError(f"load_fn must return shape {self._q_motor.shape}, got {tau.shape}")
            motor_nm = tau * self.joint_map.direction          # joint Nm -> motor Nm, as the bus does
            return {motor_id: float(motor_nm[idx]) for idx, motor_id in members}

        return per_emulator

    def _locate(self, joint: str) -> tuple[DynamixelEmulator | DamiaoEmulator, int]:
        if joint not in self._where:
            raise KeyError(f"unknown joint {joint!r}; known: {sorted(self._where)}")
        port, motor_id = self._where[joint]
        return self.emulators[port], motor_id

    def faults(self, joint: str) -> tuple[FaultInjector, int]:
        """The fault injector holding `joint`'s motor, and that motor's id."""
        emu, motor_id = self._locate(joint)
        return emu.faults, motor_id

    def set_hardware_error(self, joint: str, kind: str | None) -> None:
        emu, motor_id = self._locate(joint)
        emu.set_hardware_error(motor_id, kind)

    def damiao_motor(self, joint: str) -> EmulatedMotor:
        """`joint`'s emulated Damiao motor, updated to now (its state, registers, last MIT frame)."""
        emu, motor_id = self._locate(joint)
        if not isinstance(emu, DamiaoEmulator):
            raise TypeError(f"{joint!r} is not on a Damiao bus")
        return emu.motor(motor_id)

    def set_register(self, joint: str, reg: int, value: float | int) -> None:
        """Damiao: give `joint`'s motor register `reg` (damiao_protocol.REG_*) the value `value`."""
        emu, motor_id = self._locate(joint)
        if not isinstance(emu, DamiaoEmulator):
            raise TypeError(f"{joint!r} is not on a Damiao bus")
        emu.set_register(motor_id, reg, value)

    def motor_position(self, joint: str) -> float:
        """Present motor angle of `joint` in radians (emulator truth)."""
        emu, motor_id = self._locate(joint)
        if isinstance(emu, DynamixelEmulator):
            from ..dynamixel_bus import ticks_to_rad

            return float(ticks_to_rad(emu.present_ticks(motor_id)))
        return emu.motor(motor_id).position

    def positions(self) -> np.ndarray:
        """Present positions of all 14 joints in driver units (emulator truth)."""
        names = list(self._where)
        return self.joint_map.to_driver(np.array([self.motor_position(n) for n in names]))

    def torque_enabled(self, joint: str) -> bool:
        emu, motor_id = self._locate(joint)
        if isinstance(emu, DynamixelEmulator):
            return emu.torque_enabled(motor_id)
        return emu.motor(motor_id).enabled

    def drop_torque(self, joint: str) -> None:
        """The motor's torque goes off without any error flag (a brown-out, a power-cycled motor):
        Damiao reports the disabled state, a Dynamixel's Torque Enable reads 0; it stops holding."""
        emu, motor_id = self._locate(joint)
        with emu._lock:
            if isinstance(emu, DynamixelEmulator):
                emu.servos[motor_id].table[ADDR_TORQUE_ENABLE] = 0
            else:
                emu.motors[motor_id].enabled = False

    def stick(self, joint: str, stuck: bool = True) -> None:
        """The motor keeps reporting torque on but no longer follows its target (the worst case:
        a loss it does not report); only a tracking check sees it."""
        emu, motor_id = self._locate(joint)
        with emu._lock:
            if isinstance(emu, DynamixelEmulator):
                emu.servos[motor_id].stuck = stuck
            else:
                emu.motors[motor_id].stuck = stuck

    def move_by_hand(self, joint: str, value: float) -> None:
        """A hand puts an unpowered joint at `value` (driver units): a leader arm being moved."""
        emu, motor_id = self._locate(joint)
        i = list(self._where).index(joint)
        driver = np.zeros(len(self._where))
        driver[i] = value
        motor = float(self.joint_map.to_motor(driver)[i])
        with emu._lock:
            if isinstance(emu, DynamixelEmulator):
                from ..dynamixel_bus import rad_to_ticks

                emu.servos[motor_id].position = float(rad_to_ticks(np.array([motor]))[0])
            else:
                emu.motors[motor_id].position = motor

    def cut(self, joints: list[str] | None = None, cut: bool = True) -> None:
        """Damiao: cut (cut=False: restore) the wire to `joints` (None: every motor, both channels: a
        stalled bus): frames to them are lost unseen, so their command timeout runs, and they answer none."""
        for joint in self._where if joints is None else joints:
            emu, motor_id = self._locate(joint)
            if not isinstance(emu, DamiaoEmulator):
                raise TypeError(f"{joint!r} is not on a Damiao bus")
            emu.faults.cut(motor_id, cut)

    def motor_states(self) -> dict[str, tuple[bool, int]]:
        """Damiao: every joint's motor truth now, {joint: (enabled, error code)} (one call over a process pipe)."""
        return {j: (m.enabled, m.error) for j, m in ((j, self.damiao_motor(j)) for j in self._where)}

    def frames_seen(self, kind: str) -> int:
        """Damiao: frames of `kind` (enable, disable, clear, mit, status, register) the motors received so far."""
        return sum(e.seen[kind] for e in self.emulators.values() if isinstance(e, DamiaoEmulator))

    def silence(self, joint: str, silent: bool = True) -> None:
        """`joint`'s motor stops answering (silent=False: answers again); it still sees every frame."""
        emu, motor_id = self._locate(joint)
        emu.faults.silence(motor_id, silent)

    def glitch(self, joint: str, offset: float, count: int = 1) -> None:
        """The next `count` replies of `joint`'s motor report its position `offset` rad off."""
        emu, motor_id = self._locate(joint)
        emu.faults.glitch(motor_id, offset, count)

    def stop(self) -> None:
        for emu in self.emulators.values():
            emu.stop()

    def __enter__(self) -> "EmulatedRig":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
