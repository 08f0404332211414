"""MuJoCo's GL backend, chosen once before MuJoCo is first imported anywhere in the process.

MuJoCo picks its GL backend when it is first imported; a module that renders later (the simulated
arm's cameras) cannot change it. Every module of ours that imports `mujoco` imports this first:
offscreen rendering on the CPU through EGL by default. A user's own MUJOCO_GL (e.g. osmesa) wins.
"""
import os

os.environ.setdefault("MUJOCO_GL", "egl")
