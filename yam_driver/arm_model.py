"""The one physical description of a YAM arm: links, masses, motors, gripper.

Read by the driver's gravity model (yam_driver/gravity.py: the feed-forward torque in every MIT
command) and by the MuJoCo simulation (vam_sim/yam_mujoco/model.py: the simulated arm), so the
torque the driver computes is the torque the simulated arm needs.

Per arm:  base -> link1 (joint1, yaw) -> link2 (joint2) -> link3 (joint3) -> link4 (joint4)
              -> link5 (joint5) -> link6 (joint6) -> two fingers sliding along link6's x axis

Sources:
- kinematics (link frames, joint axes), link masses and centres of mass: the YAM's published
  model as carried by MuJoCo Menagerie's `i2rt_yam` (i2rt's YAM description). i2rt's own
  `i2rt/robot_models/arm/yam/yam.xml` (i2rt-robotics/i2rt @ 5d47b358) is a newer revision with
  other link frames (link masses 0.101/1.469/0.983/0.462/0.403 kg against 0.124/1.244/0.854/
  0.464/0.351 here); the simulation's tasks and the shipped yam64 policy are built on these
  frames, so this file keeps them. The gravity model and the simulation read the same numbers,
  so feed-forward in simulation is exact, and on the real arm the per-joint factor in the driver
  YAML (i2rt's `gravity_comp_factor`, 1.0-1.2) absorbs what the model misses.
- rotational inertias are not published per link in that model: mass x 2e-3 / 1e-3 kg m^2
  (ASSUMPTION; gravity torque does not depend on them, only dynamics does).
- motors: joint1-3 DM4340, joint4-6 and the gripper DM4310 (i2rt `robots/config/yam.yml`,
  `linear_4310.yml`); peak torques 27 Nm (DM4340) and 7 Nm (DM4310) from Damiao's published
  motor table (the MIT encoding ranges 28 / 10 Nm are wider than what the motor can deliver);
  rotor inertia at the output 0.032 (DM4340, as carried by the Menagerie model) and 1.8e-3 kg m^2
  (DM4310: 1.8e-5 at the rotor x a 10:1 gear squared, Damiao's table).
- gripper: the linear_4310 gripper; `FINGER_TRAVEL` 0.0475 m per finger (i2rt
  `linear_4310.yml` gripper_stroke 0.096 m for the gap), a finger 0.07 kg (ASSUMPTION).
"""
from __future__ import annotations

from dataclasses import dataclass

from vam_stack.robot import load_robot

ROBOT = load_robot()
ARMS = ROBOT.arms
ARM_JOINTS = ROBOT.joint_names
FINGER_TRAVEL = 0.0475  # m per finger: rail travel of the linear gripper, 0 = closed
FINGER_SQUEEZE = 0.004  # m past closed the fingers may be commanded (grip force on thin objects)
FINGER_MASS = 0.07  # kg per finger (ASSUMPTION)
GRASP_Z = 0.1347  # m along link6 z: centre between the finger pads (grasp site)
GRAVITY = 9.81  # m/s^2


@dataclass(frozen=True)
class MotorSpec:
    """What a motor can deliver (not its MIT encoding ranges: yam_driver/damiao_protocol.py)."""

    peak_torque: float  # Nm at the output: feed-forward and the simulated motor saturate here
    armature: float  # kg m^2: rotor inertia seen at the output (simulation)
    sim_class: str  # MJCF default class of the joints it drives


MOTORS = {
    "DM4340": MotorSpec(27.0, 0.032, "dm4340"),
    "DM4310": MotorSpec(7.0, 0.0018, "dm4310"),
    "DM3507": MotorSpec(3.0, 0.0006, "dm4310"),  # linear_3507 gripper motor (Damiao table: peak 3 Nm)
}
ARM_MOTORS = ("DM4340", "DM4340", "DM4340", "DM4310", "DM4310", "DM4310")  # joint1..joint6
GRIPPER_MOTOR = "DM4310"

# (body pos in parent, body quat (w x y z, unnormalised), mass kg, com) per link
_BODIES = (
    ((0.0, 0.0, 0.0631), (1, 0, 0, 1), 0.124, (-0.0019, -0.008, 0.021)),
    ((2.5e-05, -0.02, 0.0409), (1, 1, 1, 1), 1.244, (0.132, 0.0, 0.0003)),
    ((0.264, 0.0, 0.0), (0, 1, 0, 0), 0.854, (-0.1218, -0.0548, -0.0001)),
    ((-0.245, -0.06, 0.0), (1, 0, 0, 0), 0.464, (-0.077, -0.0527, 0.0002)),
    ((-0.074, -0.0395, 2.5e-05), (1, -1, 1, 1), 0.351, (0.0, 0.0003, 0.0354)),
    ((0.0, 0.0353, 0.0395), (1, -1, 0, 0), 0.553, (-0.0002, 0.0, 0.0293)),
)
# (joint range rad, *body, motor class) per link: the ranges are the robot description's mechanical ones
LINKS = tuple(((lo, hi), *b, MOTORS[m].sim_class)
              for lo, hi, b, m in zip(ROBOT.joint_lower, ROBOT.joint_upper, _BODIES, ARM_MOTORS, strict=True))
# Collision/visual capsules per link in the link's frame: (from xyz, to xyz, radius).
_CAPSULES = (
    (((0, 0, 0.0), (0, 0, 0.035), 0.032),),
    (((0.0, 0, 0), (0.264, 0, 0), 0.03),),
    (((-0.02, -0.06, 0), (-0.245, -0.06, 0), 0.03), ((0, 0, 0), (-0.02, -0.06, 0), 0.028)),
    (((0, 0, 0), (-0.074, -0.04, 0), 0.026),),
    (((0, 0.0, 0.0), (0, 0.035, 0.0395), 0.026),),
    (((0, 0, 0.0), (0, 0, 0.04), 0.028),),
)


def _f(v) -> str:
    return " ".join(f"{x:.6g}" for x in v)


def defaults_xml(finger_armature: float = 0.1) -> str:
    """The MJCF <default> classes the arm bodies use (joint friction, armatures, finger rails)."""
    return f"""<default>
  <geom solref="0.005 1" friction="1 0.005 0.0001"/>
  <default class="yam">
    <joint axis="0 0 1" frictionloss="0.1"/>
    <default class="dm4340"><joint armature="{MOTORS['DM4340'].armature}" damping="0.0"/></default>
    <default class="dm4310"><joint armature="{MOTORS['DM4310'].armature}" damping="0.0"/></default>
    <default class="finger">
      <joint type="slide" range="{-FINGER_SQUEEZE} {FINGER_TRAVEL}" armature="{finger_armature:.6g}" frictionloss="0.1"/>
      <position ctrlrange="{-FINGER_SQUEEZE} {FINGER_TRAVEL}"/>
    </default>
    <default class="pad"><geom condim="6" friction="1.5 0.01 0.001" priority="1" rgba="0.35 0.45 0.75 1"/></default>
  </default>
  <default class="object"><geom condim="6" friction="1.2 0.01 0.001" solref="0.005 1"/></default>
</default>"""


def arm_xml(arm: str, y: float, z: float = 0.0) -> str:
    """One arm (base at (0, y, z)) with its gripper and wrist camera, as MJCF bodies."""
    p = f"{arm}_"
    out = [f'<body name="{p}base" pos="0 {y:.4f} {z}" childclass="yam">',
           f'<geom name="{p}base" type="cylinder" size="0.045 0.03" pos="0 0 0.03" rgba="0.2 0.2 0.22 1"/>']
    closers = ["</body>"]
    for i, ((lo, hi), pos, quat, mass, com, cls) in enumerate(LINKS):
        link = f"{p}link{i + 1}"
        out.append(f'<body name="{link}" pos="{_f(pos)}" quat="{_f(quat)}">')
        out.append(f'<inertial pos="{_f(com)}" mass="{mass}" diaginertia="{mass * 2e-3:.5g} {mass * 2e-3:.5g} {mass * 1e-3:.5g}"/>')
        out.append(f'<joint name="{p}joint{i + 1}" class="{cls}" range="{lo} {hi}"/>')
        rgba = "0.85 0.85 0.88 1" if i in (1, 2) else "0.25 0.25 0.28 1"
        for k, (a, b, r) in enumerate(_CAPSULES[i]):
            out.append(f'<geom name="{link}_c{k}" type="capsule" fromto="{_f(a)} {_f(b)}" size="{r}" rgba="{rgba}"/>')
        closers.append("</body>")
    out.append(_gripper_xml(p))
    return "\n".join(out + closers[::-1])


def _gripper_xml(p: str) -> str:
    """Housing, two fingers (slide along link6 x) with pads, wrist camera, grasp site."""
    fingers = []
    for side, sign in (("a", 1.0), ("b", -1.0)):
        fingers.append(
            f'<body name="{p}finger_{side}" pos="{sign * 0.006:.4f} 0 0.0">'
            f'<inertial pos="0 0 0.1" mass="{FINGER_MASS}" diaginertia="6e-5 6e-5 3e-5"/>'
            f'<joint name="{p}finger_{side}" class="finger" axis="{sign:.0f} 0 0"/>'
            f'<geom name="{p}finger_{side}" class="pad" type="box" size="0.004 0.012 0.04" pos="{sign * 0.001:.4f} 0 0.105"/>'
            f'</body>')
    return (f'<geom name="{p}housing" type="box" size="0.06 0.033 0.012" pos="0 0 0.055" rgba="0.2 0.2 0.22 1"/>'
            + "".join(fingers)
            + f'<site name="{p}grasp" pos="0 0 {GRASP_Z}" size="0.006" rgba="0 1 0 0.0"/>'
            + f'<body name="{p}wrist_mount" pos="0 0.065 0.05">'
              f'<geom name="{p}wrist_mount" type="box" size="0.021 0.012 0.012" rgba="0.1 0.1 0.1 1"/>'
              f'<camera name="{p}wrist" pos="0 0 0.02" mode="fixed" xyaxes="-1 0 0 0 0.94 0.34"/></body>')


def single_arm_mjcf() -> str:
    """One arm alone (no table, objects or actuators): the gravity model's MuJoCo model. The
    right arm is the left one moved along y, so one model serves both."""
    return f"""<mujoco model="yam_arm">
<compiler angle="radian" autolimits="true"/>
<option gravity="0 0 {-GRAVITY}"/>
{defaults_xml()}
<worldbody>
{arm_xml("arm", 0.0)}
</worldbody>
</mujoco>
"""
