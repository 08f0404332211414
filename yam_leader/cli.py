"""vam-stack leader calibrate: record a leader arm's offsets (and trigger ends) into a leader config.

Hold the leader at a pose whose follower joint angles are known (`--pose home`: the follower
driver config's home_pose, the folded rest; `--pose zero`; or 12 numbers, left joint1..6 then
right joint1..6, in rad) and run:

    vam-stack leader calibrate --pose home --gripper --out runs/leader/yam_leader.yaml

The leader's bus is read with torque off (never enabled); offset = servo - sign * pose per joint
(yam_leader.calibration). `--gripper` then asks for each trigger released and squeezed. The file
written is a whole leader config (its bus section copied from --config): start the yam_leader
node with `config_file:=<it>`. `--emulated` runs the same steps on an emulated leader
(yam_driver.emulators) whose servo horns sit at known errors from --config's offsets, and checks
that the calibrated mapping reads the pose back (nothing is moved by a person there).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from vam_stack.config import ConfigError, load_yaml
from vam_stack.outputs import claim_out_file
from vam_stack.paths import config_dir

from .calibration import calibrate, median_servo_angles, write_leader
from .mapping import ARM_JOINTS, compose, load_leader

# the emulated leader's servo horns sit this far [rad] from --config's offsets (right arm: negated),
# and its triggers read these servo angles released / squeezed: what an emulated calibration must find
EMULATED_HORN_ERROR = np.array([0.21, -0.13, 0.08, -0.31, 0.17, -0.05])
EMULATED_TRIGGER = (0.35, 1.2)


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = sub.add_parser("calibrate", help="record the leader's offsets at a known pose into a leader config file")
    c.add_argument("--config", default=str(config_dir() / "yam_leader.yaml"),
                   help="the leader config to start from (build, signs, bus); default config/yam_leader.yaml")
    c.add_argument("--pose", default="home",
                   help="where the leader is held: home (the follower driver config's home_pose), zero, or 12 "
                        "comma-separated rad values (left joint1..6, right joint1..6)")
    c.add_argument("--driver-config", default=None,
                   help="the follower's driver YAML whose home_pose --pose home means; default "
                        "config/yam_driver_damiao.yaml")
    c.add_argument("--gripper", action="store_true",
                   help="also record each trigger's servo angle released and squeezed (asks for each)")
    c.add_argument("--out", required=True, help="the leader config file to write")
    c.add_argument("--overwrite", action="store_true", help="let --out replace an existing file")
    c.add_argument("--emulated", action="store_true",
                   help="an emulated leader (no hardware) with known horn errors: try the command, CI")


def follower_pose(spec: str, driver_config: str | None) -> np.ndarray:
    """14 follower values (grippers 1.0, open) for --pose: home | zero | 12 numbers."""
    per_arm = ARM_JOINTS + 1
    if spec == "home":
        from yam_driver.config import default_config_path, load_config

        cfg = load_config(driver_config or default_config_path("damiao"))
        if cfg.home_pose is None:
            raise ConfigError(f"{driver_config or default_config_path('damiao')} has no home_pose: give --pose")
        pose = np.array(cfg.home_pose, np.float64)
    elif spec == "zero":
        pose = np.zeros(2 * per_arm)
    else:
        try:
            arm = [float(v) for v in spec.split(",")]
        except ValueError:
            raise ValueError(f"--pose must be home, zero or 12 comma-separated numbers, got {spec!r}") from None
        if len(arm) != 2 * ARM_JOINTS or not np.isfinite(arm).all():
            raise ValueError(f"--pose needs 12 finite values (left joint1..6, right joint1..6), got {spec!r}")
        pose = np.insert(np.array(arm), [ARM_JOINTS, 2 * ARM_JOINTS], 1.0)
    pose[[ARM_JOINTS, per_arm + ARM_JOINTS]] = 1.0      # the grippers play no part in the offsets
    return pose


def _emulated_truth(mapping):
    """The emulated leader's real mapping: --config's offsets off by EMULATED_HORN_ERROR."""
    arms = [dataclasses.replace(a, offsets=tuple(np.add(a.offsets, (1 if i == 0 else -1) * EMULATED_HORN_ERROR)),
                                gripper_released=EMULATED_TRIGGER[0], gripper_squeezed=EMULATED_TRIGGER[1])
            for i, a in enumerate(mapping.arms)]
    return dataclasses.replace(mapping, arms=arms)


def _trigger_ends(bus, rig, names) -> tuple[np.ndarray, np.ndarray]:
    """Servo angles with both triggers released, then squeezed (the operator moves them; on the
    emulated leader this command does)."""
    ends = []
    for fraction, what in ((1.0, "RELEASE both triggers fully"), (0.0, "SQUEEZE both triggers fully and hold them")):
        if rig is not None:
            for n in names:
                rig.move_by_hand(n, fraction)
            print(f"{what}: (emulated: moved for you)")
        else:
            input(f"{what}, then press Enter ")
        ends.append(median_servo_angles(bus))
    return ends[0], ends[1]


def run(args) -> int:
    from yam_driver.bus import BusError
    from yam_driver.buses import make_bus

    claim_out_file(args.out, args.overwrite, flag="--out")       # before any hardware is touched
    mapping, bus_cfg = load_leader(args.config)
    pose = follower_pose(args.pose, args.driver_config)
    raw_bus = load_yaml(args.config)["yam_driver"]
    rig = truth_cfg = None
    if args.emulated:
        from yam_driver.emulators import EmulatedRig

        truth_cfg = compose(_emulated_truth(mapping), bus_cfg)
        rig = EmulatedRig(truth_cfg, initial=pose)
        bus_cfg = compose(mapping, rig.config)            # --config's mapping on the emulator's ports
        print(f"emulated leader: servo horns {EMULATED_HORN_ERROR.tolist()} rad off --config's offsets (right arm "
              f"negated), triggers {EMULATED_TRIGGER[0]} released / {EMULATED_TRIGGER[1]} squeezed")
    bus = make_bus(bus_cfg)
    try:
        try:
            bus.connect()                                 # pings every servo; torque is never enabled
        except (BusError, OSError) as e:
            raise SystemExit(f"{e} (the leader's adapter plugged in, ids as configured? vam-stack joints "
                             f"--leader)") from None
        print(f"leader ({mapping.build}, {bus_cfg.bus} on {[a.port for a in bus_cfg.arms]}): hold it at --pose "
              f"{args.pose}; reading...")
        servo = median_servo_angles(bus)
        before = bus.joint_map.to_driver(servo)
        trigger = None
        if args.gripper:
            trigger = _trigger_ends(bus, rig, [n for n in bus_cfg.joint_names if n.endswith("gripper")])
    finally:
        bus.close(disable_torque=False)
        if rig is not None:
            rig.stop()
    how = f"--pose {args.pose}" + (" --gripper" if args.gripper else "") + (" (emulated leader)" if rig else "")
    new = calibrate(mapping, servo, pose, how, trigger)
    compose(new, raw_bus, args.out)          # the driver schema's checks (single servo turn) before writing
    names = bus_cfg.joint_names
    print(f"{'joint':16s} {'sign':>4s} {'offset was':>10s} {'offset now':>10s} {'read before':>11s} {'pose':>7s}")
    for a, arm in enumerate(new.arms):
        for i in range(ARM_JOINTS):
            k = a * (ARM_JOINTS + 1) + i
            print(f"{names[k]:16s} {new.signs(arm)[i]:>+4d} {mapping.arms[a].offsets[i]:>+10.4f} "
                  f"{arm.offsets[i]:>+10.4f} {before[k]:>+11.4f} {pose[k]:>+7.3f}")
        print(f"{arm.name + '_gripper':16s} trigger released {arm.gripper_released:+.4f} squeezed "
              f"{arm.gripper_squeezed:+.4f} rad" + ("" if trigger is not None else " (kept: no --gripper)"))
    out = write_leader(args.config, new, args.out)
    load_leader(out)                         # the file reads back as a valid leader config
    print(f"wrote {out}: start the leader with config_file:={out}")
    if truth_cfg is not None:
        _check_emulated(truth_cfg, new, pose)
    return 0


def _check_emulated(truth_cfg, new, pose) -> None:
    """Read the emulated leader (its true horns) through the calibrated mapping, with one joint moved
    by hand: every joint must read the follower's value (a Dynamixel tick is 0.0015 rad)."""
    from yam_driver.buses import make_bus
    from yam_driver.emulators import EmulatedRig

    moved = "left_joint2"
    with EmulatedRig(truth_cfg, initial=pose) as rig:
        want = pose.copy()
        want[truth_cfg.joint_names.index(moved)] += 0.3
        rig.move_by_hand(moved, float(want[truth_cfg.joint_names.index(moved)]))
        bus = make_bus(compose(new, rig.config))
        bus.connect()
        try:
            got = bus.joint_map.to_driver(median_servo_angles(bus))
        finally:
            bus.close(disable_torque=False)
    arm = [i for i, n in enumerate(truth_cfg.joint_names) if not n.endswith("gripper")]
    err = float(np.max(np.abs(got[arm] - want[arm])))
    print(f"check (emulated): {moved} moved by hand to {want[truth_cfg.joint_names.index(moved)]:+.3f} rad; the "
          f"calibrated leader reads {got[truth_cfg.joint_names.index(moved)]:+.3f}; largest arm-joint error "
          f"{err:.4f} rad")
    if err > 0.005:
        raise RuntimeError(f"the calibrated mapping reads the emulated leader {err:.4f} rad off")
