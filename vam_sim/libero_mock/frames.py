"""LIBERO's world frame and the mock's drawing frame, and the one map between them.

Everything a policy exchanges with the mocked bridge is in LIBERO's conventions: actions are
deltas in LIBERO's world frame (robosuite's OSC_POSE: x from the robot towards the agent-view
camera, y to the robot's left, z up; rotations as world-frame axis-angle deltas), and the
proprio is the end-effector position in that world frame (table top at z ~ 0.9 m), its
orientation as an axis-angle vector and the two finger positions.

The images LIBERO users train on are the renders rotated by 180 degrees (openpi, lerobot and
the HF LIBERO datasets flip rows and columns). MuJoCo's raw offscreen image is only upside
down, so the rotated image is a left-right mirror of what the camera sees: in it +y moves the
gripper to the LEFT. The mock draws an un-mirrored pinhole view of its own "drawing frame"
instead, which is LIBERO's world reflected once: x_d = -(y - y0), y_d = -(x - x0),
z_d = z - z0, with (x0, y0, z0) the centre of the table top. In the drawing frame +x_d is to
the right of the agent view, +y_d away from the camera (towards the robot), z_d up from the
table. A reflection of the world seen through an un-mirrored camera gives exactly the mirrored
image, so the mock's pictures match the rotated LIBERO ones. Positions and translation deltas
map with the reflection `M`; rotation vectors are pseudovectors and map with `-M`;
orientations map as M R M, composed with a fixed relabelling of the tool axes (`TOOL`) so that
the gripper pointing down reads as LIBERO's reset orientation (about (pi, 0, 0)).
"""
from __future__ import annotations

import numpy as np

# The reflection between LIBERO's world and the drawing frame (its own inverse).
M = np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
# Centre of the table top in LIBERO's world frame (main_table of the goal scenes: the BDDL
# region ranges are relative to the table centre; its top is at z = 0.9 m).
TABLE_TOP = np.array([0.0, 0.0, 0.9])
# Relabelling of the tool axes: M R_down M is a half turn about y; LIBERO's gripper pointing
# down is a half turn about x. TOOL = Rz(pi) turns one into the other.
TOOL = np.diag([-1.0, -1.0, 1.0])


def pos_to_libero(p: np.ndarray) -> np.ndarray:
    """Drawing-frame position(s) (..., 3) -> LIBERO world position(s)."""
    return np.asarray(p, dtype=np.float64) @ M.T + TABLE_TOP


def pos_from_libero(p: np.ndarray) -> np.ndarray:
    """LIBERO world position(s) (..., 3) -> drawing frame."""
    return (np.asarray(p, dtype=np.float64) - TABLE_TOP) @ M.T


def table_xy_from_libero(x: float, y: float) -> tuple[float, float]:
    """A point given relative to the table centre in LIBERO's axes (BDDL ranges) -> drawing xy."""
    return -float(y), -float(x)


def delta_from_libero(v: np.ndarray) -> np.ndarray:
    """Translation delta (3,) in LIBERO's world frame -> drawing frame (and back: M is its own inverse)."""
    return M @ np.asarray(v, dtype=np.float64)


def rotvec_from_libero(w: np.ndarray) -> np.ndarray:
    """World-frame rotation vector (3,) in LIBERO's frame -> drawing frame (a pseudovector: -M)."""
    return -(M @ np.asarray(w, dtype=np.float64))


def action_from_libero(a: np.ndarray) -> np.ndarray:
    """7-dim LIBERO action -> the same action in the drawing frame (gripper unchanged)."""
    out = np.array(a, dtype=np.float64, copy=True)
    out[:3] = delta_from_libero(out[:3])
    out[3:6] = rotvec_from_libero(out[3:6])
    return out


action_to_libero = action_from_libero  # the map is an involution


def rot_to_libero(r: np.ndarray) -> np.ndarray:
    """Gripper orientation (world-from-tool) in the drawing frame -> LIBERO's world frame."""
    return M @ r @ M @ TOOL


def rot_from_libero(r: np.ndarray) -> np.ndarray:
    """Gripper orientation in LIBERO's world frame -> drawing frame."""
    return M @ r @ TOOL.T @ M


__all__ = ["M", "TABLE_TOP", "TOOL", "action_from_libero", "action_to_libero", "delta_from_libero",
           "pos_from_libero", "pos_to_libero", "rot_from_libero", "rot_to_libero", "rotvec_from_libero",
           "table_xy_from_libero"]
