"""vam-stack joints: read every joint with torque off, and say which way each one moves by hand.

The first-day check of an arm (docs/bring_up.md): are the ids where the config says, does each
joint read where it is, and does a joint moved by hand by a known way read the sign you expect?

    vam-stack joints --bus damiao                       # the follower (config/yam_driver_damiao.yaml)
    vam-stack joints --config my_driver.yaml --against home
    vam-stack joints --leader                           # the leader arm (config/yam_leader.yaml)

It prints each joint's id, port, position (driver units: rad, the gripper as an opening fraction),
servo angle [rad] and limits, then for `--seconds` one line whenever a joint has moved more than
`--step` since its last line, with the sign of the motion. The follower is read through the driver
(`YamDriver.connect()`: every motor must answer and sit inside its limits; torque stays off, and
`step()` only reads while connected); the leader through its bus (never powered), so an
uncalibrated leader outside its limits still reads. `--emulated` reads emulated motors
(yam_driver.emulators) and `--emulate-move JOINT=DELTA` moves one by hand there, one a second.
A motor that faults during the watch (the driver's faults: no reply, a hardware error; the
leader: a joint that never answered) is named in a closing FAILED line and the exit status is 1;
a bus that does not open is one line with advice for that bus (CAN for Damiao, the serial
adapter for Dynamixel), exit 2.
"""
from __future__ import annotations

import os
import time

import numpy as np

from vam_stack.paths import config_dir


def add_arguments(p) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--bus", choices=("damiao", "dynamixel"), default="damiao",
                       help="the follower's shipped driver file config/yam_driver_<bus>.yaml (default damiao)")
    which.add_argument("--config", default=None, help="a follower driver YAML (section yam_driver)")
    which.add_argument("--leader", nargs="?", const=str(config_dir() / "yam_leader.yaml"), default=None,
                       metavar="FILE", help="the leader arm's config (default config/yam_leader.yaml)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to watch for hand motion (default 10)")
    p.add_argument("--step", type=float, default=0.1,
                   help="a joint that moved this far [driver units] since its last line gets a new one")
    p.add_argument("--against", default=None, metavar="POSE",
                   help="home (the follower driver file's home_pose) or zero: print each joint's distance from it")
    p.add_argument("--emulated", action="store_true", help="emulated motors (no hardware): try the command, CI")
    p.add_argument("--emulate-move", action="append", default=[], metavar="JOINT=DELTA",
                   help="with --emulated: a hand moves JOINT by DELTA (driver units), one move a second")


def _moves(items: list[str], names: list[str]) -> list[tuple[str, float]]:
    out = []
    for item in items:
        name, sep, delta = item.partition("=")
        if not sep or name not in names:
            raise ValueError(f"--emulate-move takes JOINT=DELTA with JOINT one of {names}, got {item!r}")
        try:
            out.append((name, float(delta)))
        except ValueError:
            raise ValueError(f"--emulate-move {item!r}: DELTA must be a number") from None
    return out


def _z(x: float) -> float:
    """x for printing at 3 decimals, without a '-0.000'."""
    return 0.0 if abs(x) < 5e-4 else float(x)


def _reference(spec: str | None, follower_cfg) -> np.ndarray | None:
    if spec is None:
        return None
    if spec == "zero":
        return np.zeros(len(follower_cfg.joint_names))
    if spec == "home":
        if follower_cfg.home_pose is None:
            raise ValueError("--against home: the follower driver file has no home_pose")
        return np.asarray(follower_cfg.home_pose, np.float64)
    raise ValueError(f"--against must be home or zero, got {spec!r}")


def run(args) -> int:
    from yam_driver.config import default_config_path, load_config

    if args.seconds < 0 or args.step <= 0:
        raise ValueError(f"--seconds must be >= 0 and --step > 0, got {args.seconds!r} and {args.step!r}")
    follower_cfg = load_config(args.config or default_config_path(args.bus))
    if args.leader is not None:
        from .mapping import load_leader

        mapping, cfg = load_leader(args.leader)
        what = f"leader ({mapping.build}) from {args.leader}"
    else:
        cfg, what = follower_cfg, f"follower from {args.config or default_config_path(args.bus)}"
    reference = _reference(args.against, follower_cfg)
    moves = _moves(args.emulate_move, cfg.joint_names)
    if moves and not args.emulated:
        raise ValueError("--emulate-move needs --emulated (on hardware, move the joints by hand)")
    ports = [a.port for a, _ in cfg.joints]          # as configured (an emulator renames them)
    rig = None
    if args.emulated:
        from yam_driver.emulators import EmulatedRig

        start = reference if reference is not None else (np.asarray(cfg.home_pose, np.float64)
                                                         if cfg.home_pose is not None else None)
        rig = EmulatedRig(cfg, initial=start)
        cfg = rig.config
        what += " (emulated)"
    try:
        return _watch(args, cfg, what, reference, moves, rig, ports)
    finally:
        if rig is not None:
            rig.stop()


def _connect(args, cfg):
    """(driver or None, bus, present position, ok): the follower through the driver, the leader
    through its bus. A bus that cannot open or a motor that does not answer is one line, exit 2."""
    from yam_driver.bus import BusError
    from yam_driver.buses import make_bus
    from yam_driver.driver import YamDriver

    try:
        if args.leader is not None:
            bus = make_bus(cfg)
            bus.connect()                         # pings every servo; a leader is never powered
            first = bus.read_state()
            return None, bus, first.position, first.ok
        driver = YamDriver(cfg)
        present = driver.connect()                # every motor answers, inside its limits; torque off
        return driver, driver.bus, present, np.isfinite(present)
    except (BusError, OSError) as e:
        raise SystemExit(f"{e} ({bus_advice(cfg)}? docs/bring_up.md)") from None


def bus_advice(cfg) -> str:
    """What to check when `cfg`'s bus does not open or a motor does not answer, for that bus: a CAN
    adapter for Damiao motors, a serial adapter (U2D2) for Dynamixel servos."""
    ports = ", ".join(dict.fromkeys(a.port for a, _ in cfg.joints))
    if cfg.bus == "dynamixel":
        return (f"serial adapter (U2D2) plugged in at {ports}, this user in the dialout group, servos powered, "
                f"set to Protocol 2.0 at {cfg.baudrate} baud, ids as configured")
    return (f"CAN adapter plugged in, {ports} up at 1 Mbit/s (sudo ip link set <channel> up type can bitrate "
            f"1000000), motors powered, ids as configured")


def _watch(args, cfg, what, reference, moves, rig, ports) -> int:
    driver, bus, present, ok = _connect(args, cfg)
    names = cfg.joint_names
    ids = [(port, j.id) for port, (_, j) in zip(ports, cfg.joints)]
    moved: dict[str, str] = {}
    faulted: dict[str, str] = {}                   # joint -> its first fault (the driver's) during the watch
    answered = np.zeros(len(names), bool)          # the leader: a joint read at least once during the watch
    tried = False
    try:
        servo = bus.joint_map.to_motor(present)
        print(f"{what}: {cfg.bus}, torque off")
        print(f"{'joint':15s} {'id':>4s} {'port':14s} {'position':>9s} {'servo rad':>9s} {'limits':>17s}"
              + (f" {'- ' + args.against:>9s}" if reference is not None else ""))
        for i, n in enumerate(names):
            (port, mid), (_, j) = ids[i], cfg.joints[i]
            pos = f"{_z(present[i]):+9.3f}" if ok[i] else f"{'no reply':>9s}"
            row = f"{n:15s} {mid:>4d} {port[-14:]:14s} {pos} {_z(servo[i]):+9.3f} [{j.lower:+7.3f},{j.upper:+7.3f}]"
            if reference is not None:
                row += f" {_z(present[i] - reference[i]):+9.3f}"
            print(row)
        anchor, prev = present.copy(), present.copy()     # last reported position; last tick's
        hand: list[list] = []                      # emulated hand motions: [joint, from, to, start, done]
        t0 = time.monotonic()
        print(f"move each joint by hand now ({args.seconds:g} s): a line when a joint has moved {args.step:g} "
              f"and stopped", flush=True)
        while time.monotonic() - t0 < args.seconds:
            t = time.monotonic() - t0
            if rig is not None:
                _emulate_hand(rig, names, moves, hand, prev, t)
            if driver is None:
                r = bus.read_state()
                pos, good = r.position, r.ok
            else:
                report = driver.step()
                pos, good = report.position, report.read_ok
                for f in report.new_faults:
                    faulted.setdefault(f.joint, f.reason)
                    print(f"t={t:5.2f}s FAULT {f}", flush=True)
            answered |= np.asarray(good, bool)
            tried = True
            still = good & (np.abs(pos - prev) < 0.01)        # a hand that paused (< 0.3 rad/s)
            for i in np.flatnonzero(still & (np.abs(pos - anchor) >= args.step)):
                sign = "+" if pos[i] > anchor[i] else "-"
                moved[names[i]] = moved.get(names[i], "") + sign
                print(f"t={t:5.2f}s {names[i]:15s} (id {ids[i][1]}) {_z(anchor[i]):+.3f} -> {_z(pos[i]):+.3f}: "
                      f"moved {sign} (servo {float(bus.joint_map.to_motor(pos)[i]):+.3f} rad)", flush=True)
                anchor[i] = pos[i]
            prev = np.where(good, pos, prev)
            time.sleep(cfg.period_s)
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        if driver is None:
            bus.close(disable_torque=False)
        else:
            driver.shutdown()                     # torque was never on: nothing to hold or switch off
    print("moved: " + (", ".join(f"{n} {s}" for n, s in moved.items()) if moved else "nothing"))
    if driver is None and tried:                   # the leader's bus: a joint that never answered
        faulted.update({n: "no reply during the watch" for n, ok in zip(names, answered) if not ok})
    if not faulted:
        return 0
    which = "every motor" if len(faulted) == len(names) else f"{len(faulted)} of {len(names)} motors"
    shown = ", ".join(f"{n} ({why})" for n, why in list(faulted.items())[:4])
    more = f", and {len(faulted) - 4} more" if len(faulted) > 4 else ""
    if rig is not None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        advice = (f"emulated motors answer from this machine's CPUs, load {load:.1f} on {os.cpu_count()} cores: "
                  f"rerun when it is quieter")
    else:
        advice = f"{bus_advice(cfg)}? docs/bring_up.md"
    print(f"FAILED: {which} faulted during the watch: {shown}{more}; these readings do not show the arm "
          f"({advice})")
    return 1


HAND_SPEED = 1.0     # driver units per second an emulated hand moves a joint (the driver refuses jumps)
HAND_EVERY = 1.5     # s between the starts of two --emulate-move motions


def _emulate_hand(rig, names, moves, hand, prev, t) -> None:
    """Start the next --emulate-move every HAND_EVERY s (the first at 1 s); move each started one
    toward its end at HAND_SPEED, a step per tick, as a hand would."""
    if moves and t >= 1.0 + HAND_EVERY * len(hand):
        name, delta = moves.pop(0)
        i = names.index(name)
        hand.append([i, float(prev[i]), float(prev[i] + delta), t, False])
    for motion in hand:
        i, a, b, ts, done = motion
        if done:
            continue
        frac = min(1.0, HAND_SPEED * (t - ts) / max(abs(b - a), 1e-9))
        rig.move_by_hand(names[i], a + frac * (b - a))
        motion[4] = frac >= 1.0
