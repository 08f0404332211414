"""yam_mujoco: the bimanual YAM in MuJoCo, behind the driver's bus and the camera interface.

`YamSim` (physics, cameras) with `MujocoBus` (a `yam_driver.JointBus`) and
`MujocoCameraSource` (a `camera_bridge` source) lets the unchanged driver core, safety
filter, chunk executor and camera bridge run the real-robot path without hardware.
Rendering is offscreen on the CPU (MUJOCO_GL=egl by default, or osmesa).
"""
# Offscreen rendering on the CPU: MUJOCO_GL is set (egl unless the user chose) before any
# `import mujoco` of this package (every module of it imports mujoco after this).
import vam_stack.mujoco_gl  # noqa: F401  (a side effect: MUJOCO_GL set)
