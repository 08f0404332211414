"""`vam-stack collect --robot yam-mujoco`: expert demonstrations of the simulated YAM in the
dataset format, and what the trainer does differently with them (frame skip, absolute targets)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vam_cli.main import main
from vam_model.networks.config import load_config
from vam_stack.config import ConfigError
from vam_sim.collect_yam import YamCollectConfig
from vam_data.dataset import Dataset
from vam_train.train import check_dataset_fits


@pytest.fixture(scope="module")
def yam_dataset(tmp_path_factory, mujoco_renders):
    out = tmp_path_factory.mktemp("yam") / "demos"
    assert main(["collect", "--robot", "yam-mujoco", "--tasks", "tray_lift", "--episodes-per-task", "1",
                 "--seed", "100", "--view-size", "32x24", "--out", str(out)]) == 0
    return out


@pytest.mark.sim
def test_yam_demonstrations_are_stored_in_the_dataset_format(yam_dataset):
    info = json.loads((yam_dataset / "meta" / "info.json").read_text())
    assert info["action_type"] == "absolute_joint" and info["frame_shape"] == [24, 96, 3]
    assert info["expert_success"]["tray_lift"]["episodes"] >= 1 and info["seed"] == 100
    data = Dataset(yam_dataset)
    ep = data.episodes[0]
    assert ep.meta["suite"] == "yam_mujoco" and ep.meta["task"] == "tray_lift" and ep.meta["success"]
    assert ep.proprio.shape[1] == 14 and ep.actions.shape[1] == 14 and set(np.unique(ep.phase)) <= {0, 1}
    assert ep.frame(0).shape == (24, 96, 3)
    assert data.absolute_actions


@pytest.mark.sim
def test_samples_take_the_frame_skip_and_hold_the_last_absolute_target(yam_dataset):
    data = Dataset(yam_dataset)
    n = len(data.episodes[0])
    s = data.sample(0, frames=3, chunk=4, skip=3)
    np.testing.assert_array_equal(s["frames"][1], data.episodes[0].frame(3))   # every third recorded frame
    end = data.sample(n - 2, frames=3, chunk=5)                  # the chunk runs 3 steps past the episode end
    last = data.episodes[0].actions[-1]
    np.testing.assert_array_equal(end["actions"][1:], np.repeat(last[None], 4, axis=0))  # held, not zeros


@pytest.mark.sim
def test_the_trainer_refuses_a_dataset_its_preset_cannot_learn(yam_dataset):
    data = Dataset(yam_dataset)
    check_dataset_fits(data, load_config("yam64"))
    with pytest.raises(ConfigError, match="14-dim actions and 14-dim proprio; preset 'libero64' takes 7 and 8"):
        check_dataset_fits(data, load_config("libero64"))


@pytest.mark.unit
@pytest.mark.parametrize("kw, match", [({"tasks": ("stack",)}, "unknown task 'stack'"),
                                       ({"tasks": ()}, "tasks must not be empty"),
                                       ({"view_width": 8}, "view size"),
                                       ({"episodes_per_task": 0}, "episodes_per_task"),
                                       ({"joint_noise": 0.3}, "joint_noise must be in"),
                                       ({"joint_noise": -0.01}, "joint_noise must be in"),
                                       ({"noise_every": 0}, "noise_every"),
                                       ({"noise_where": "grasp"}, "noise_where must be one of"),
                                       ({"miss_m": 0.1}, "miss_m must be in"),
                                       ({"miss_m": float("nan")}, "miss_m must be in"),
                                       ({"miss_m": 0.05, "tasks": ("handover", "relay")}, "collect handover alone"),
                                       ({"miss_every": 0}, "miss_every"),
                                       ({"miss_m": 0.05, "miss_when": "late"}, "miss_when must be one of")])
def test_collect_config_names_the_bad_value(kw, match):
    with pytest.raises(ConfigError, match=match):
        YamCollectConfig(**kw)


@pytest.mark.unit
def test_joint_noise_hits_every_nth_attempt():
    cfg = YamCollectConfig(joint_noise=0.05, noise_every=2)
    assert [cfg.noise_of(e) for e in range(4)] == [0.0, 0.05, 0.0, 0.05]
    assert YamCollectConfig().noise_of(1) == 0.0                          # off by default (the shipped recipe)
    miss = YamCollectConfig(miss_m=0.05, miss_every=3)
    assert [miss.miss_of(e) for e in range(6)] == [0.0, 0.0, 0.05, 0.0, 0.0, 0.05]
    assert YamCollectConfig().miss_of(0) == 0.0


@pytest.mark.unit
def test_a_bad_view_size_is_refused_with_its_text(tmp_path):
    with pytest.raises(ValueError, match="--view-size must be WxH"):
        main(["collect", "--robot", "yam-mujoco", "--view-size", "64", "--out", str(tmp_path / "d")])


@pytest.mark.unit
def test_the_noise_where_choices_are_the_runners():
    """`--noise-where` lists its choices literally (importing the runner would load MuJoCo on every
    CLI call): they must stay the runner's NOISE_WHERE, spelled with dashes."""
    import argparse

    from vam_sim.yam_mujoco.runner import NOISE_WHERE
    from vam_cli.collect import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    action = next(a for a in p._actions if a.dest == "noise_where")
    assert [c.replace("-", "_") for c in action.choices] == list(NOISE_WHERE)
