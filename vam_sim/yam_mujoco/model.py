"""MJCF of the bimanual YAM scene, generated in Python: two 6-DoF arms with linear grippers.

Kinematics (link frames and joint axes), link masses, rotor armatures and the
actuator gains follow the YAM's published model facts (i2rt's YAM description as carried by
MuJoCo Menagerie's `i2rt_yam`); the geometry is our own capsules and boxes. Joint names and ranges come from the one robot
description (vam_stack.robot, config/yam_robot.yaml), which the safety filter and the driver
are checked against too. Per arm:

  base -> link1 (joint1, yaw) -> link2 (joint2) -> link3 (joint3) -> link4 (joint4)
       -> link5 (joint5) -> link6 (joint6) -> two fingers sliding along link6's x axis

Arm joints have position actuators with the YAM gains (DM4340: kp 80, kd 5, +-28 Nm;
DM4310: kp 10, kd 1.5, +-10 Nm). Links 2..6 are gravity compensated (`gravcomp`), as the
i2rt controller compensates gravity on the real arm. Each finger has its own position
actuator on its rail (0 = closed .. 0.0475 m = open per finger). Contacts between a body and
its parent are MuJoCo's default exclusion; the extra exclusions below cover the neighbours
that still touch (base/link2, fingers/each other, wrist camera mount).

Cameras: `top` above the table looking down, `<arm>_wrist` on each link6 looking along the
fingers. Objects of a task are free bodies (or fixed markers) listed in `SceneSpec.objects`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from vam_stack.robot import load_robot


ROBOT = load_robot()
ARMS = ROBOT.arms
ARM_JOINTS = ROBOT.joint_names
FINGER_TRAVEL = 0.0475  # m per finger: rail travel of the linear gripper, 0 = closed
FINGER_SQUEEZE = 0.004  # m past closed the fingers may be commanded (grip force on thin objects)
TABLE_HEIGHT = 0.0  # m: table top is the world z = 0 plane the arms stand on

# (body pos in parent, body quat (w x y z, unnormalised), mass kg, com, class) per link
_BODIES = (
    ((0.0, 0.0, 0.0631), (1, 0, 0, 1), 0.124, (-0.0019, -0.008, 0.021), "dm4340"),
    ((2.5e-05, -0.02, 0.0409), (1, 1, 1, 1), 1.244, (0.132, 0.0, 0.0003), "dm4340"),
    ((0.264, 0.0, 0.0), (0, 1, 0, 0), 0.854, (-0.1218, -0.0548, -0.0001), "dm4340"),
    ((-0.245, -0.06, 0.0), (1, 0, 0, 0), 0.464, (-0.077, -0.0527, 0.0002), "dm4310"),
    ((-0.074, -0.0395, 2.5e-05), (1, -1, 1, 1), 0.351, (0.0, 0.0003, 0.0354), "dm4310"),
    ((0.0, 0.0353, 0.0395), (1, -1, 0, 0), 0.553, (-0.0002, 0.0, 0.0293), "dm4310"),
)
# (joint range rad, *body) per link: the ranges are the robot description's mechanical ones
_LINKS = tuple(((lo, hi), *b) for lo, hi, b in zip(ROBOT.joint_lower, ROBOT.joint_upper, _BODIES, strict=True))
# Collision/visual capsules per link in the link's frame: (from xyz, to xyz, radius).
_CAPSULES = (
    (((0, 0, 0.0), (0, 0, 0.035), 0.032),),
    (((0.0, 0, 0), (0.264, 0, 0), 0.03),),
    (((-0.02, -0.06, 0), (-0.245, -0.06, 0), 0.03), ((0, 0, 0), (-0.02, -0.06, 0), 0.028)),
    (((0, 0, 0), (-0.074, -0.04, 0), 0.026),),
    (((0, 0.0, 0.0), (0, 0.035, 0.0395), 0.026),),
    (((0, 0, 0.0), (0, 0, 0.04), 0.028),),
)
GAINS = {"dm4340": (80.0, 5.0, 28.0, 0.032), "dm4310": (10.0, 1.5, 10.0, 0.0018)}  # kp, kd, torque limit, armature
GRASP_Z = 0.1347  # m along link6 z: centre between the finger pads (grasp site)
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


def _f(v) -> str:
    return " ".join(f"{x:.6g}" for x in v)


def _arm_xml(arm: str, y: float) -> str:
    p = f"{arm}_"
    out = [f'<body name="{p}base" pos="0 {y:.4f} {TABLE_HEIGHT}" childclass="yam">',
           f'<geom name="{p}base" type="cylinder" size="0.045 0.03" pos="0 0 0.03" rgba="0.2 0.2 0.22 1"/>']
    closers = ["</body>"]
    for i, ((lo, hi), pos, quat, mass, com, cls) in enumerate(_LINKS):
        link = f"{p}link{i + 1}"
        grav = ' gravcomp="1"' if i >= 1 else ""
        out.append(f'<body name="{link}" pos="{_f(pos)}" quat="{_f(quat)}"{grav}>')
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
            f'<body name="{p}finger_{side}" pos="{sign * 0.006:.4f} 0 0.0" gravcomp="1">'
            f'<inertial pos="0 0 0.1" mass="0.07" diaginertia="6e-5 6e-5 3e-5"/>'
            f'<joint name="{p}finger_{side}" class="finger" axis="{sign:.0f} 0 0"/>'
            f'<geom name="{p}finger_{side}" class="pad" type="box" size="0.004 0.012 0.04" pos="{sign * 0.001:.4f} 0 0.105"/>'
            f'</body>')
    return (f'<geom name="{p}housing" type="box" size="0.06 0.033 0.012" pos="0 0 0.055" rgba="0.2 0.2 0.22 1"/>'
            + "".join(fingers)
            + f'<site name="{p}grasp" pos="0 0 {GRASP_Z}" size="0.006" rgba="0 1 0 0.0"/>'
            + f'<body name="{p}wrist_mount" pos="0 0.065 0.05" gravcomp="1">'
              f'<geom name="{p}wrist_mount" type="box" size="0.021 0.012 0.012" rgba="0.1 0.1 0.1 1"/>'
              f'<camera name="{p}wrist" pos="0 0 0.02" mode="fixed" xyaxes="-1 0 0 0 0.94 0.34"/></body>')


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


def build_mjcf(scene: SceneSpec = SceneSpec()) -> str:
    """The whole scene as an MJCF string (table, two arms, cameras, task objects, actuators)."""
    arms = "\n".join(_arm_xml(a, y) for a, y in zip(ARMS, (scene.arm_spacing / 2, -scene.arm_spacing / 2)))
    objects = "\n".join(_object_xml(o) for o in scene.objects)
    acts, excludes = [], []
    for a in ARMS:
        p = f"{a}_"
        for i, (_, _, _, _, _, cls) in enumerate(_LINKS):
            kp, kd, tmax, _ = GAINS[cls]
            acts.append(f'<position name="{p}joint{i + 1}" joint="{p}joint{i + 1}" kp="{kp}" kv="{kd}" '
                        f'forcerange="{-tmax} {tmax}" inheritrange="1"/>')
        for side in ("a", "b"):
            acts.append(f'<position name="{p}finger_{side}" joint="{p}finger_{side}" class="finger"/>')
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
<default>
  <geom solref="0.005 1" friction="1 0.005 0.0001"/>
  <default class="yam">
    <joint axis="0 0 1" frictionloss="0.1"/>
    <default class="dm4340"><joint armature="{GAINS['dm4340'][3]}" damping="0.0"/></default>
    <default class="dm4310"><joint armature="{GAINS['dm4310'][3]}" damping="0.0"/></default>
    <default class="finger">
      <joint type="slide" range="{-FINGER_SQUEEZE} {FINGER_TRAVEL}" armature="0.1" frictionloss="0.1"/>
      <position ctrlrange="{-FINGER_SQUEEZE} {FINGER_TRAVEL}" kp="2000" kv="150" forcerange="-60 60"/>
    </default>
    <default class="pad"><geom condim="6" friction="1.5 0.01 0.001" priority="1" rgba="0.35 0.45 0.75 1"/></default>
  </default>
  <default class="object"><geom condim="6" friction="1.2 0.01 0.001" solref="0.005 1"/></default>
</default>
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
