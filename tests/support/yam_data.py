"""Small YAM datasets and recordings for the data tests (tests/vam_data), built without the
simulator: shared by module name through pytest.ini's `pythonpath` (test modules never import each
other: launch_testing's collection hook imports them in pytest's default import mode)."""
import numpy as np

from vam_data.contract import contract_for
from vam_stack.recording import McapRecorder

C = contract_for("yam64")
NAMES = list(C.state_names)


def synthetic_yam_demos(n_episodes=3, length=12, seed=0, view=(64, 48)):
    from vam_data.contract import contract_for
    from vam_data.writing import ImportedDemo

    c = contract_for("yam64")
    rng = np.random.default_rng(seed)
    w, h = view
    demos = []
    for e in range(n_episodes):
        t = np.linspace(0, 1, length)[:, None]
        lo = np.array([c.bounds[n][0] for n in c.state_names])
        hi = np.array([c.bounds[n][1] for n in c.state_names])
        mid = (lo + hi) / 2 + 0.1 * rng.standard_normal(14)
        q = (mid + 0.2 * np.sin(2 * np.pi * t + rng.random(14))).astype(np.float32)
        q[:, [6, 13]] = np.clip(0.5 + 0.5 * np.sin(3 * t + e), 0, 1)[:, [0, 0]]
        act = np.roll(q, -1, axis=0)
        act[-1] = q[-1]
        yy, xx = np.mgrid[0:h, 0:3 * w]                                     # smooth moving gradients: a lossy
        frames = np.stack([np.stack([(xx * 255 // (3 * w) + 7 * k) % 256,      # codec keeps them close
                                     (yy * 255 // h + 5 * e) % 256,
                                     ((xx + yy + 3 * k) * 2) % 256], axis=-1) for k in range(length)]).astype(np.uint8)
        phase = (np.arange(length) >= length // 3).astype(np.uint8)
        demos.append(ImportedDemo(instruction=["pick up the blue block", "hand it over"][e % 2], stacked=frames,
                                  proprio=q, actions=act.astype(np.float32), phase_codes=phase,
                                  meta={"suite": "yam_mujoco", "task": "handover", "episode": e, "seed": 100 + e,
                                        "success": True}))
    return demos


def write_recording(path, ticks=40, rate=30.0, shuffle=True, gap_at=None, frame_every=1, gripper_scale=1.0,
                    instruction="hand the block over", drop=(), t0=5.0, view=(64, 48)):
    """A recording as the graph writes it: joint states 2 ms before each target, a frame per tick, the
    instruction and two phase labels; targets are named in a shuffled order (matching by name is the job)."""
    rng = np.random.default_rng(0)
    order = list(rng.permutation(14)) if shuffle else list(range(14))
    w, h = view
    with McapRecorder(path, origin_s=0.0) as rec:
        if "instruction" not in drop:
            rec.write_string("instruction", instruction, t0 - 0.5)
        rec.write_string("phase", "planning", t0 - 0.4)
        t = t0
        for k in range(ticks):
            if gap_at is not None and k == gap_at:
                t += 0.2
            q = np.full(14, 0.5) + 0.01 * k
            q[[6, 13]] = 0.5 * gripper_scale
            target = q + 0.05
            if "joint_states" not in drop:
                rec.write_joint_state("joint_states", NAMES, q, t - 0.002)
            if k % frame_every == 0:
                frame = np.full((h, 3 * w, 3), k % 256, np.uint8)
                rec.write_image("stacked_image", frame, t - 0.001)
            if k == ticks // 2:
                rec.write_string("phase", "manipulation", t - 0.0005)
            rec.write_joint_state("teleop_command", [NAMES[i] for i in order], target[order], t)
            rec.write_joint_state("joint_targets", NAMES, np.clip(target, 0.0, 0.52), t)    # the filter's output
            t += 1.0 / rate
    return path
