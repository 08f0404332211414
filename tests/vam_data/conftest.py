"""Small YAM datasets in this project's format, built without the simulator (valid ranges, smooth
joints, textured frames), for the import/export tests."""
import numpy as np
import pytest


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


@pytest.fixture(scope="module")
def yam_set(tmp_path_factory):
    """A 3-episode YAM dataset at yam64's geometry (64x48 views, 30 Hz)."""
    from vam_data.contract import contract_for
    from vam_data.writing import write_imported

    root = tmp_path_factory.mktemp("yam") / "demos"
    write_imported(synthetic_yam_demos(), contract_for("yam64"), root, {"format": "synthetic"})
    return root
