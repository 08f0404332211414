"""yam_mujoco: the bimanual YAM in MuJoCo, behind the driver's bus and the camera interface.

`YamSim` (physics, cameras) with `MujocoBus` (a `yam_driver.JointBus`) and
`MujocoCameraSource` (a `camera_bridge` source) lets the unchanged driver core, safety
filter, chunk executor and camera bridge run the real-robot path without hardware.
Rendering is offscreen on the CPU (MUJOCO_GL=egl by default, or osmesa).
"""
import os

# Offscreen rendering on the CPU. MuJoCo picks its GL backend when it is first imported, so
# this must run before any `import mujoco`: every module of this package imports it after us.
# A user's own MUJOCO_GL (e.g. osmesa) wins.
os.environ.setdefault("MUJOCO_GL", "egl")
