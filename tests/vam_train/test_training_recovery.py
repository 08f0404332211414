"""Recovery rounds (DAgger-style): takeover steps, expert segments from policy states, trainer merge + resume."""
import json

import numpy as np
import pytest
import torch

from vam_sim.libero_mock import make_env, record_expert, rollout_expert
from vam_data.dataset import Dataset, DatasetError, write_dataset
from vam_train.losses import LossConfig
from vam_sim import collect_recovery
from vam_sim.collect_recovery import recovery_segments
from vam_train.recovery import RecoveryConfig, takeover_steps
from vam_train.train import Batches, TrainConfig, Trainer
from vam_stack.config import ConfigError


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds") / "demos"
    return write_dataset(root, [rollout_expert("goal", t, 0, 9) for t in range(10)])


def _cfg(**kw):
    rec = RecoveryConfig(**kw.pop("recovery", {}))
    base = dict(steps=4, batch=2, warmup=1, ema=0.5, checkpoint_every=2, log_every=1, threads=1,
                loss=LossConfig(action_samples=2), recovery=rec)
    return TrainConfig(**(base | kw))


@pytest.mark.unit
def test_takeover_steps_are_distinct_replan_boundaries_in_range():
    cfg = RecoveryConfig(takeovers=3, first_takeover=5, last_takeover=60)
    for s in range(20):
        steps = takeover_steps(cfg, 10, np.random.default_rng(s))
        assert len(steps) == 3 == len(set(steps)) and steps == sorted(steps)
        assert all(k % 10 == 0 and 10 <= k <= 60 for k in steps)
    assert takeover_steps(cfg, 10, np.random.default_rng(1)) == takeover_steps(cfg, 10, np.random.default_rng(1))
    assert takeover_steps(RecoveryConfig(takeovers=5, first_takeover=10, last_takeover=20), 10,
                          np.random.default_rng(0)) == [10, 20]          # capped at the grid
    with pytest.raises(ValueError, match="no multiple"):
        takeover_steps(RecoveryConfig(first_takeover=11, last_takeover=19), 10, np.random.default_rng(0))


@pytest.mark.unit
@pytest.mark.parametrize("kw,match", [({"at": (0.5, 0.3)}, "increasing"), ({"at": (1.0,)}, r"\(0, 1\)"),
                                      ({"weight": 0.0}, "weight"), ({"takeovers": 0}, "takeovers"),
                                      ({"first_takeover": 30, "last_takeover": 20}, "first_takeover"),
                                      ({"guidance": "cfg"}, "'cfg'"), ({"workers": 0}, "workers.*got 0"),
                                      ({"workers": 2.5}, "workers must be an int.*got 2.5")])
def test_recovery_config_rejects_bad_values(kw, match):
    with pytest.raises(ConfigError, match=match):
        RecoveryConfig(**kw)


@pytest.mark.unit
def test_record_expert_finishes_from_a_perturbed_state_and_refuses_a_finished_episode():
    env = make_env("goal", 2, 0, 9)
    obs = env.reset()
    for _ in range(15):                                           # drive off course: straight sideways
        obs, *_ = env.step(np.array([0, 1, 0, 0, 0, 0, -1], np.float32))
    start = obs["proprio"].copy()
    demo = record_expert(env, obs)
    assert demo.success and env.done
    np.testing.assert_array_equal(demo.proprio[0], start)        # the segment starts where the policy left it
    assert demo.stacked.shape[0] == len(demo) == len(demo.phases)
    with pytest.raises(ValueError, match="already over"):
        record_expert(env, obs)


@pytest.mark.unit
def test_recovery_segments_branch_expert_takeovers_off_the_policy_rollout(root, micro_cfg, tmp_path):
    from vam_model.policy import build_policy

    tr = Trainer(_cfg(steps=1), tmp_path / "run", data=Dataset(root), model_cfg=micro_cfg)
    tr.fit(progress=False)
    policy = build_policy(checkpoint=tmp_path / "run" / "model.safetensors", guidance="none")
    res = recovery_segments(policy, "goal", 3, 0, 200, [20, 10])
    assert res["policy_steps"] == 20 and res["takeover_steps"] == [10, 20]
    assert all(d.success for d in res["demos"]) and res["expert_failures"] == 0
    expert = rollout_expert("goal", 3, 0, 200)
    # the policy (not the expert) drove the first steps: the takeover states are off the expert's path
    assert not np.allclose(res["demos"][0].proprio[0], expert.proprio[10], atol=1e-3)
    assert not np.allclose(res["demos"][1].proprio[0], expert.proprio[20], atol=1e-3)


@pytest.mark.unit
def test_trainer_runs_a_recovery_round_merges_it_and_resumes_identically(root, micro_cfg, tmp_path):
    rec = dict(at=(0.5,), episodes_per_task=1, takeovers=1, first_takeover=10, last_takeover=10, weight=3.0)
    base = Dataset(root)
    n_base = len(base.episodes)
    full = Trainer(_cfg(recovery=rec), tmp_path / "full", data=base, model_cfg=micro_cfg, rollouts=collect_recovery)
    full.fit(progress=False)
    assert len(base.episodes) == n_base                         # the caller's dataset is not mutated
    assert full.recovery_rounds == 1 and full.step == 4
    added = [e for e in full.data.episodes if e.meta.get("source") == "recovery"]
    summary = json.loads((tmp_path / "full" / "recovery" / "round_0" / "summary.json").read_text())
    assert len(added) == summary["episodes"] >= 8 and summary["rollouts"] == 10
    assert all(e.meta["takeover_step"] == 10 and e.meta["success"] for e in added)
    assert (tmp_path / "full" / "recovery" / "round_0" / "policy.safetensors").is_file()
    lines = [json.loads(x) for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if "recovery" in x] == [2]  # progress 0.5 = after step 2 of 4
    # recovery steps are sampled `weight` times as often as demonstration steps
    p = full.batches.p.reshape(-1)
    is_rec = np.repeat([e.meta.get("source") == "recovery" for e in full.data.episodes],
                       [len(e) for e in full.data.episodes])
    assert np.allclose(p[is_rec].max() / p[~is_rec].max(), 3.0)
    # an interrupted run resumes with the round merged and ends bit-identical
    part = Trainer(_cfg(recovery=rec), tmp_path / "part", data=Dataset(root), model_cfg=micro_cfg, rollouts=collect_recovery)
    part.fit(progress=False, stop_after=3)
    resumed = Trainer(_cfg(recovery=rec), tmp_path / "part", data=Dataset(root), model_cfg=micro_cfg, rollouts=collect_recovery)
    resumed.load_state()
    assert resumed.recovery_rounds == 1 and len(resumed.data) == len(full.data)
    resumed.fit(progress=False)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name


@pytest.mark.unit
def test_a_round_that_keeps_nothing_is_recorded_and_the_run_trains_on(root, micro_cfg, tmp_path, monkeypatch):
    real = collect_recovery.recovery_segments

    def round_0_fails(policy, suite, task, episode, *args):        # episode = round * episodes_per_task + e
        if episode == 0:
            return {"policy_termination": "timeout", "expert_failures": 1, "demos": [], "takeover_steps": []}
        return real(policy, suite, task, episode, *args)

    monkeypatch.setattr(collect_recovery, "recovery_segments", round_0_fails)
    rec = dict(at=(0.25, 0.75), episodes_per_task=1, takeovers=1, first_takeover=10, last_takeover=10)
    base = Dataset(root)
    n_base = len(base.episodes)
    full = Trainer(_cfg(recovery=rec), tmp_path / "full", data=base, model_cfg=micro_cfg, rollouts=collect_recovery)
    full.fit(progress=False)
    assert full.step == 4 and full.recovery_rounds == 2
    assert len(base.episodes) == n_base                         # round 1 still extends a private copy
    s0 = json.loads((tmp_path / "full" / "recovery" / "round_0" / "summary.json").read_text())
    s1 = json.loads((tmp_path / "full" / "recovery" / "round_1" / "summary.json").read_text())
    assert s0["episodes"] == 0 and s0["rollouts"] == 10 and s0["expert_failures"] == 10
    assert "no expert takeover finished" in s0["error"] and "error" not in s1
    added = [e for e in full.data.episodes if e.meta.get("source") == "recovery"]
    assert len(added) == s1["episodes"] > 0 and {e.meta["round"] for e in added} == {1}
    lines = [json.loads(x) for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    assert [x["recovery"]["episodes"] for x in lines if "recovery" in x] == [0, s1["episodes"]]
    # a resume after both rounds skips the empty one and merges the other
    resumed = Trainer(_cfg(recovery=rec), tmp_path / "full", data=Dataset(root), model_cfg=micro_cfg, rollouts=collect_recovery)
    resumed.load_state()
    assert resumed.recovery_rounds == 2 and len(resumed.data) == len(full.data)


@pytest.mark.unit
def test_dataset_extend_rejects_instructions_the_trainer_did_not_embed(root, tmp_path):
    one = Dataset(write_dataset(tmp_path / "one", [rollout_expert("goal", 0, 0, 9)]))
    with pytest.raises(DatasetError, match="not in"):
        one.extend(Dataset(root))
    full = Dataset(root)
    n = len(full)
    full.extend(one)
    assert len(full) == n + len(one) and full.locate(n) == (10, 0)
    assert Batches(full, _cfg(), {}, 17, 17, (224, 448)).p is None       # no recovery episodes: uniform


@pytest.mark.unit
def test_train_command_checks_recovery_at_before_loading_data(tmp_path):
    from vam_cli.main import main

    out = str(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"recovery.at.*1.5"):
        main(["train", "--recovery-at", "0.2,1.5", "--dataset", "no/such/dir", "--out", out])
    with pytest.raises(ConfigError, match="--recovery-at.*'0.3,x'"):
        main(["train", "--recovery-at", "0.3,x", "--dataset", "no/such/dir", "--out", out])
    with pytest.raises(ConfigError, match="increasing"):
        main(["train", "--recovery-at", "0.5,0.3", "--dataset", "no/such/dir", "--out", out])


@pytest.mark.sim
def test_trainer_runs_a_recovery_round_on_the_simulated_yam(tmp_path, mujoco_renders, monkeypatch):
    """A yam_mujoco dataset's round rolls weights out on the simulated YAM, hands over to the expert
    at the takeover tick, and merges the expert's part at the data's view size. The rollouts use
    the shipped weights: a 2-step model drives the arms into poses the scripted expert does not
    recover from (measured: tray_lift takeovers at 30 and 60 both timed out). Even from the
    shipped weights' states a takeover can fail (the fourth weights: one of these two), and a
    failed one is dropped, so the test asks for at least one kept segment."""
    import shutil

    from vam_model.networks.config import load_config
    from vam_stack.paths import models_dir
    from vam_sim.collect_yam import YamCollectConfig, collect_yam

    export = Trainer.export

    def shipped_for_rollouts(self, path):
        if path.name != "policy.safetensors":
            return export(self, path)
        shutil.copyfile(models_dir() / "yam64.safetensors", path)
        return path

    monkeypatch.setattr(Trainer, "export", shipped_for_rollouts)
    root = tmp_path / "demos"
    collect_yam(YamCollectConfig(tasks=("handover",), episodes_per_task=1, seed=100), root)
    rec = dict(at=(0.5,), episodes_per_task=1, takeovers=2, first_takeover=30, last_takeover=60, workers=2)
    tr = Trainer(_cfg(steps=2, recovery=rec, planning_weight=2.0), tmp_path / "run", data=Dataset(root),
                 model_cfg=load_config("yam64"), rollouts=collect_recovery)
    tr.fit(progress=False)
    summary = json.loads((tmp_path / "run" / "recovery" / "round_0" / "summary.json").read_text())
    assert summary["rollouts"] == 2 and summary["taken"] == 2, summary
    assert summary["episodes"] == 2 - summary["expert_failures"] >= 1, summary
    added = [e for e in tr.data.episodes if e.meta.get("source") == "recovery"]
    steps = [e.meta["takeover_step"] for e in added]
    assert len(added) == summary["episodes"] and steps == sorted(steps) and set(steps) <= {30, 60}
    home = Dataset(root).episodes[0].proprio[0]
    for e in added:
        assert e.meta["task"] == "handover" and e.meta["success"] and e.meta["episode"] == 0
        assert e.frame(0).shape == (48, 192, 3) and set(np.unique(e.phase)) == {0, 1}
        assert len(e) < 750                                          # the expert's ticks only
        # it starts where the policy left the arms, not at the episode's home pose
        assert not np.allclose(e.proprio[0], home, atol=1e-3)
    assert sum(len(e) for e in added) == summary["frames"]
    round_data = Dataset(tmp_path / "run" / "recovery" / "round_0" / "data")
    assert round_data.absolute_actions and round_data.info["source"] == "recovery"


@pytest.mark.unit
def test_a_trainer_with_recovery_rounds_needs_a_simulator_to_roll_out_in(root, micro_cfg, tmp_path):
    # vam_train imports no simulator (issue 62): the rollouts come in from the caller (vam-stack train)
    with pytest.raises(ConfigError, match=r"recovery.at \(0.5,\).*rollouts=vam_sim.collect_recovery"):
        Trainer(_cfg(recovery=dict(at=(0.5,))), tmp_path / "r", data=Dataset(root), model_cfg=micro_cfg)
