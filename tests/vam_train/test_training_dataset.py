"""Dataset format round trip, sample alignment (inference convention) and collect."""
import json

import numpy as np
import pytest

from vam_sim.libero_mock import rollout_expert
from vam_sim.collect import CollectConfig, _task_attempts, collect
from vam_data.dataset import Dataset, DatasetError, write_dataset
from vam_stack.config import ConfigError


@pytest.fixture(scope="module")
def demos():
    return [rollout_expert("goal", 1, 0, 7), rollout_expert("goal", 6, 0, 7)]


@pytest.fixture(scope="module")
def data(demos, tmp_path_factory):
    root = write_dataset(tmp_path_factory.mktemp("ds") / "demos", demos, {"suites": ["goal"]})
    return Dataset(root)


@pytest.mark.unit
def test_round_trip_is_exact(demos, data):
    assert len(data.episodes) == 2 and len(data) == sum(len(d) for d in demos)
    for d, ep in zip(demos, data.episodes):
        assert ep.meta["instruction"] == d.instruction and ep.meta["length"] == len(d)
        np.testing.assert_array_equal(ep.actions, d.actions)
        np.testing.assert_array_equal(ep.proprio, d.proprio)
        for t in (0, len(d) // 2, len(d) - 1):
            np.testing.assert_array_equal(ep.frame(t), d.stacked[t])         # PNG is lossless
        assert [("planning", "manipulation")[p] for p in ep.phase] == d.phases
    info = json.loads((data.root / "meta" / "info.json").read_text())
    assert info["total_frames"] == len(data) and info["format"] == "vam_stack.demos/v1"


@pytest.mark.unit
def test_stats_match_the_data(demos, data):
    acts = np.concatenate([d.actions for d in demos])
    np.testing.assert_allclose(data.stats["action_mean"], acts.mean(0), atol=1e-5)
    assert all(s >= 0.05 for s in data.stats["action_std"])                  # floored: no exploding targets
    z = data.normalise("action", acts)
    assert np.isfinite(z).all() and np.abs(z).max() < 1 / 0.05 * 2 + 10


@pytest.mark.unit
def test_sample_follows_the_inference_convention(demos, data):
    d = demos[0]
    s = data.sample(3)                                    # episode 0, step 3: current frame first
    np.testing.assert_array_equal(s["frames"][0], d.stacked[3])
    np.testing.assert_array_equal(s["frames"][16], d.stacked[min(19, len(d) - 1)])
    np.testing.assert_array_equal(s["actions"][0], d.actions[3])
    np.testing.assert_array_equal(s["proprio"], d.proprio[3])
    last = data.sample(len(d) - 2)                        # near the end: frames repeat, actions pad
    np.testing.assert_array_equal(last["frames"][5], d.stacked[-1])
    np.testing.assert_array_equal(last["actions"][1], d.actions[-1])
    assert np.all(last["actions"][2:, :6] == 0) and np.all(last["actions"][2:, 6] == d.actions[-1, 6])
    assert data.locate(len(d)) == (1, 0)
    with pytest.raises(IndexError, match="out of range"):
        data.sample(len(data))


@pytest.mark.unit
def test_bad_dataset_dirs_are_named(tmp_path, data):
    with pytest.raises(DatasetError, match="is not a dataset"):
        Dataset(tmp_path)
    with pytest.raises(DatasetError, match="no episodes of suites"):
        Dataset(data.root, suites=["spatial"])


@pytest.mark.unit
@pytest.mark.parametrize("bad", [-1, 10_000, 2.5, "40", True])
def test_a_bad_train_from_is_refused_naming_it(tmp_path, demos, bad):
    root = write_dataset(tmp_path / "d", demos, {"suites": ["goal"]})
    lines = (root / "meta" / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {"train_from": bad}
    (root / "meta" / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(DatasetError, match=f"train_from {bad!r}"):
        Dataset(root)


@pytest.mark.unit
def test_collect_config_validates():
    with pytest.raises(ConfigError, match="'nope'"):
        CollectConfig(suites=("nope",))
    with pytest.raises(ConfigError, match="-1"):
        CollectConfig(episodes_per_task=-1)
    with pytest.raises(ConfigError, match="workers must be >= 1, got 0"):
        CollectConfig(workers=0)


@pytest.mark.unit
def test_attempt_waves_keep_what_a_one_by_one_loop_keeps():
    fails = {1, 2, 5}                                     # attempts the "expert" fails
    calls = []

    def run(jobs):
        calls.append([j[2] for j in jobs])
        return [(j[2] not in fails, None if j[2] in fails else f"ep{j[2]}") for j in jobs]

    cfg = CollectConfig(episodes_per_task=4, noise=0.1, noise_every=2)
    out = list(_task_attempts(cfg, "goal", 3, run))
    assert [o[0] for o in out] == ["ep0", "ep3", "ep4", "ep6"]          # the first 4 successes in order
    assert calls == [[0, 1, 2, 3], [4, 5], [6]]                        # waves sized to what is missing
    assert out[-1][1:] == (7, 3)                                        # 7 attempts, 3 failures
    assert [cfg.noise_of(e) for e in range(4)] == [0.0, 0.1, 0.0, 0.1]
    fails.update(range(6, 100))
    with pytest.raises(RuntimeError, match="succeeded only 3 times in 12 episodes of goal task 3"):
        list(_task_attempts(cfg, "goal", 3, run))


@pytest.mark.sim
def test_collect_small(tmp_path):
    info = collect(CollectConfig(suites=("goal",), episodes_per_task=1, seed=3, noise=0.1, noise_every=1),
                   tmp_path / "d")
    assert info["total_episodes"] == 10 and info["expert_success_rate"] == 1.0
    data = Dataset(tmp_path / "d")
    assert len(data.instructions) == 10
    assert {e.meta["task"] for e in data.episodes} == set(range(10))
    par = collect(CollectConfig(suites=("goal",), episodes_per_task=1, seed=3, noise=0.1, noise_every=1,
                                workers=2), tmp_path / "p")
    assert par["total_episodes"] == 10
    for a, b in zip(sorted((tmp_path / "d").rglob("*")), sorted((tmp_path / "p").rglob("*"))):
        assert a.relative_to(tmp_path / "d") == b.relative_to(tmp_path / "p")
        if a.is_file() and a.name != "info.json":                      # info.json holds the wall time
            assert a.read_bytes() == b.read_bytes(), a.name
    from vam_sim.libero_mock.config import CONVENTIONS, LiberoMockConfig

    assert info["mock"] == LiberoMockConfig.load().as_dict() and info["mock_conventions"] == CONVENTIONS
    assert info["fps"] == 20.0 and info["frame_shape"] == [224, 448, 3]
    # the mock configuration file is what the dataset is recorded with (and says so)
    (tmp_path / "m.yaml").write_text("libero_mock:\n  image_size: 64\n")
    small = collect(CollectConfig(suites=("goal",), episodes_per_task=1, seed=3, noise=0.0,
                                  mock_config=str(tmp_path / "m.yaml")), tmp_path / "s")
    assert small["frame_shape"] == [64, 128, 3] and small["mock"]["image_size"] == 64
    assert Dataset(tmp_path / "s").episodes[0].frame(0).shape == (64, 128, 3)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a dataset"):
        collect(CollectConfig(episodes_per_task=1), tmp_path / "other")


@pytest.mark.sim
def test_collect_records_every_pairing_of_the_video_pretraining_suite(tmp_path):
    (tmp_path / "m.yaml").write_text("libero_mock:\n  image_size: 64\n")     # small renders: a fast test
    cfg = CollectConfig(suites=("goal_video",), episodes_per_task=1, seed=3, noise=0.0,
                        mock_config=str(tmp_path / "m.yaml"))
    assert cfg.total_episodes == 24
    info = collect(cfg, tmp_path / "v")
    assert info["total_episodes"] == 24 and info["expert_success_rate"] == 1.0
    data = Dataset(tmp_path / "v")
    assert len(set(data.instructions)) == 24 and {e.meta["suite"] for e in data.episodes} == {"goal_video"}
    with pytest.raises(ConfigError, match="'goal_vid'"):
        CollectConfig(suites=("goal_vid",))
