"""MJCF of the bimanual YAM scene, generated in Python: two 6-DoF arms with linear grippers.

The arms are the one physical description in yam_driver/arm_model.py (links, masses, motors,
gripper), which the driver's gravity model reads too; the geometry is our own capsules and
boxes. Joint names and ranges come from the one robot description (vam_stack.robot,
config/yam_robot.yaml), which the safety filter and the driver are checked against too.

Every motor follows the MIT law of a Damiao motor, torque = kp (q* - q) - kd v + t_ff,
saturated at the motor's peak torque: a `position` actuator whose control is q* + t_ff / kp
(vam_sim/yam_mujoco/sim.py sets it), so what the driver sends (target, gains, gravity
feed-forward) is what moves the arm. There is no `gravcomp`: an arm without feed-forward sags
here as a YAM does. Each finger's actuator is its gripper motor's law seen through the linear
transmission (k = motor rad per metre of one finger; force = tau k / 2 on each of the two
fingers), with the motor's rotor inertia reflected onto the rail. Contacts between a body and
its parent are MuJoCo's default exclusion; the extra exclusions below cover the neighbours
that still touch (base/link2, fingers/each other, wrist camera mount).

Cameras: `top` above the table looking down, `<arm>_wrist` on each link6 looking along the
fingers. Objects of a task are free bodies (or fixed markers) listed in `SceneSpec.objects`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from yam_driver.arm_model import (ARM_MOTORS, ARMS, FINGER_TRAVEL, GRIPPER_MOTOR, LINKS, MOTORS, _f, arm_xml,
                                   defaults_xml)

_LINKS = LINKS  # (the name the configuration checks read)
TABLE_HEIGHT = 0.0  # m: table top is the world z = 0 plane the arms stand on
# kp, kd of the arm motors (i2rt robots/config/yam.yml: kp 80/80/80/10/10/10, kd 5/5/5/1.5/1.5/1.5);
# the simulated bus sets the driver configuration's own gains at connect
GAINS = {"dm4340": (80.0, 5.0), "dm4310": (10.0, 1.5)}
# gripper motor (i2rt robots/config/linear_4310.yml: motor_kp 20, motor_kd 0.5; limiter motor_stroke
# 6.57 rad for a gripper_stroke of 0.096 m): its transmission onto one finger's rail
GRIPPER_KP, GRIPPER_KD = 20.0, 0.5
GRIPPER_MOTOR_STROKE = 6.57  # rad of motor travel from closed to open
HOME = (0.0, 1.047, 1.047, 0.0, 0.0, 0.0)  # rad: a ready pose above the table


@dataclass(frozen=True)
class ObjectSpec:
    """A free body of a task: box (size = half extents) or cylinder (size = radius, half height)."""

    name: str
    shape: str  # "box" | "cylinder"
    size: tuple[float, ...]
    rgba: tuple[float, float, float, float]
    mass: float  # kg
    parts: tuple[tuple[str, tuple[float, ...], tuple[float, float, float]], ...] = ()  # extra boxes (name, size, pos)
    free: bool = True  # False: a fixed visual marker on the table (no joint, no collisions)


@dataclass(frozen=True)
class SceneSpec:
    """Placement of the arms and the cameras."""

    arm_spacing: float = 0.6  # m between the two arm bases (left at +y/2, right at -y/2)
    table_size: tuple[float, float] = (0.8, 0.9)  # m, half extents x, y of the table top
    timestep: float = 0.002  # s: physics step (the motor loop of the real arm runs at 250 Hz)
    camera_fovy: float = 60.0  # deg, vertical field of view of every camera (4:3 images)
    top_camera_pos: tuple[float, float, float] = (0.3, 0.0, 0.8)  # m, looking straight down
    objects: tuple[ObjectSpec, ...] = field(default_factory=tuple)


def _object_xml(o: ObjectSpec) -> str:
    if o.shape not in ("box", "cylinder"):
        raise ValueError(f"object {o.name!r}: shape must be 'box' or 'cylinder', got {o.shape!r}")
    if not o.free:
        return (f'<body name="{o.name}" pos="0 0 0"><geom name="{o.name}" type="{o.shape}" size="{_f(o.size)}" '
                f'rgba="{_f(o.rgba)}" contype="0" conaffinity="0"/></body>')
    geoms = [f'<geom name="{o.name}" type="{o.shape}" size="{_f(o.size)}" rgba="{_f(o.rgba)}" class="object"/>']
    for name, size, pos in o.parts:
        geoms.append(f'<geom name="{o.name}_{name}" type="box" size="{_f(size)}" pos="{_f(pos)}" '
                     f'rgba="{_f(o.rgba)}" class="object"/>')
    return (f'<body name="{o.name}" pos="0 0 0.5"><freejoint name="{o.name}"/>'
            f'<inertial pos="0 0 0" mass="{o.mass}" diaginertia="{o.mass * 4e-4:.5g} {o.mass * 4e-4:.5g} {o.mass * 4e-4:.5g}"/>'
            + "".join(geoms) + "</body>")


def finger_gains(kp: float, kd: float, motor_stroke: float, motor: str = GRIPPER_MOTOR) -> tuple[float, float, float, float]:
    """A gripper motor's MIT law seen on one finger's rail: (kp N/m, kd N s/m, force limit N,
    reflected inertia kg). With k = motor_stroke / FINGER_TRAVEL rad per metre and both fingers on
    one motor, each finger gets force tau k / 2, stiffness kp k^2 / 2 and inertia J k^2 / 2."""
    k = abs(motor_stroke) / FINGER_TRAVEL
    return kp * k * k / 2, kd * k * k / 2, MOTORS[motor].peak_torque * k / 2, MOTORS[motor].armature * k * k / 2


def build_mjcf(scene: SceneSpec = SceneSpec()) -> str:
    """The whole scene as an MJCF string (table, two arms, cameras, task objects, actuators)."""
    arms = "\n".join(arm_xml(a, y, TABLE_HEIGHT) for a, y in zip(ARMS, (scene.arm_spacing / 2, -scene.arm_spacing / 2)))
    objects = "\n".join(_object_xml(o) for o in scene.objects)
    fkp, fkd, fmax, farm = finger_gains(GRIPPER_KP, GRIPPER_KD, GRIPPER_MOTOR_STROKE)
    acts, excludes = [], []
    for a in ARMS:
        p = f"{a}_"
        for i, (_, _, _, _, _, cls) in enumerate(LINKS):
            kp, kd = GAINS[cls]
            tmax = MOTORS[ARM_MOTORS[i]].peak_torque
            # ctrl = q* + t_ff / kp: unlimited (the feed-forward may carry it past the joint range)
            acts.append(f'<position name="{p}joint{i + 1}" joint="{p}joint{i + 1}" kp="{kp}" kv="{kd}" '
                        f'forcerange="{-tmax} {tmax}" ctrllimited="false"/>')
        for side in ("a", "b"):
            acts.append(f'<position name="{p}finger_{side}" joint="{p}finger_{side}" class="finger" '
                        f'kp="{fkp:.6g}" kv="{fkd:.6g}" forcerange="{-fmax:.6g} {fmax:.6g}"/>')
        excludes += [f'<exclude body1="{p}base" body2="{p}link2"/>', f'<exclude body1="{p}base" body2="{p}link1"/>',
                     f'<exclude body1="{p}finger_a" body2="{p}finger_b"/>', f'<exclude body1="{p}link5" body2="{p}finger_a"/>',
                     f'<exclude body1="{p}link5" body2="{p}finger_b"/>', f'<exclude body1="{p}link4" body2="{p}link6"/>',
                     f'<exclude body1="{p}link6" body2="{p}wrist_mount"/>']
    tx, ty = scene.table_size
    cx, cy, cz = scene.top_camera_pos
    return f"""<mujoco model="yam_bimanual">
<compiler angle="radian" autolimits="true"/>
<option timestep="{scene.timestep}" integrator="implicitfast" cone="elliptic" impratio="5"/>
<visual><global offwidth="640" offheight="480"/><quality shadowsize="0" offsamples="0"/>
<headlight ambient="0.45 0.45 0.45" diffuse="0.55 0.55 0.55" specular="0.05 0.05 0.05"/></visual>
{defaults_xml(farm)}
<worldbody>
  <light pos="0.2 0 1.6" dir="0 0 -1" diffuse="0.6 0.6 0.6" castshadow="false"/>
  <geom name="table" type="box" size="{tx} {ty} 0.02" pos="0.3 0 {TABLE_HEIGHT - 0.02}" rgba="0.55 0.45 0.35 1"/>
  <camera name="top" pos="{cx} {cy} {cz}" xyaxes="0 -1 0 1 0 0" fovy="{scene.camera_fovy}"/>
{arms}
{objects}
</worldbody>
<contact>
{chr(10).join(excludes)}
</contact>
<actuator>
{chr(10).join(acts)}
</actuator>
</mujoco>
"""
