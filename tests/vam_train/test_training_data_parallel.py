"""Data-parallel CPU training (train.ranks): shards, config checks, a two-process run in step."""
import json

import numpy as np
import pytest
import torch

from vam_train.losses import LossConfig
from vam_train.recovery import RecoveryConfig
from vam_train.train import Batches, TrainConfig, Trainer, fit_data_parallel
from vam_stack.config import ConfigError


def _cfg(**kw):
    base = dict(steps=4, batch=4, warmup=1, ema=0.5, checkpoint_every=2, log_every=1, threads=1,
                loss=LossConfig(action_samples=2))
    return TrainConfig(**(base | kw))


@pytest.mark.unit
@pytest.mark.parametrize("bad, match", [
    (dict(ranks=0), "train.ranks must be in"),
    (dict(ranks=3, batch=4), "must split evenly"),
    (dict(ranks=2, recovery=RecoveryConfig(at=(0.5,))), "recovery rounds run in one process"),
])
def test_ranks_that_cannot_work_are_refused_naming_the_value(bad, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(**bad)


@pytest.mark.unit
def test_each_rank_takes_a_disjoint_slice_of_the_one_batch(data, micro_cfg):
    r = micro_cfg.robot
    cfg = _cfg(batch=4, ranks=2)

    def batches(rank):
        b = Batches(data, cfg, {s: torch.zeros(1, 2, 3) for s in data.instructions}, r.chunk, r.frames,
                    (r.image_height, r.image_width), len(r.cameras), r.frame_skip)
        b.shard = (rank, 2)
        return b

    whole = batches(0).make(7, whole=True)
    parts = [batches(k).make(7) for k in (0, 1)]
    assert [p["actions"].shape[0] for p in parts] == [2, 2]
    for key in ("frames", "state", "actions"):
        assert torch.equal(torch.cat([p[key] for p in parts]), whole[key])


@pytest.mark.unit
def test_a_trainer_rank_without_a_process_group_is_refused(data, micro_cfg, tmp_path):
    with pytest.raises(RuntimeError, match="initialised process group"):
        Trainer(_cfg(ranks=2), tmp_path / "r", data=data, model_cfg=micro_cfg, rank=1)


@pytest.mark.unit
def test_two_ranks_train_in_step_and_rank_0_alone_writes_the_run(data, micro_cfg, tmp_path):
    """Two spawned gloo processes: the run finishes, the ranks' weights agree at every
    checkpoint (save_state checks them, or the run raises), and the log has one line a step
    with the ranks' mean losses."""
    from vam_model.networks.checkpoint import load_checkpoint
    from vam_model.networks.model import VideoActionModel

    out = tmp_path / "dp"
    fit_data_parallel(_cfg(ranks=2), out, ship=str(tmp_path / "shipped.safetensors"), data=data,
                      model_cfg=micro_cfg)
    lines = [json.loads(s) for s in (out / "log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]
    assert all(np.isfinite(x["total"]) for x in lines)
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] == 4
    model = VideoActionModel(micro_cfg)
    load_checkpoint(out / "model.safetensors", model)
    shipped = VideoActionModel(micro_cfg)
    load_checkpoint(tmp_path / "shipped.safetensors", shipped)
    for a, b in zip(model.state_dict().values(), shipped.state_dict().values()):
        assert torch.equal(a, b)
    # the data-parallel step moved the weights away from the shared initialisation
    torch.manual_seed(0)
    init = Trainer(_cfg(steps=1), tmp_path / "init", data=data, model_cfg=micro_cfg).model
    moved = [not torch.equal(a, b) for a, b in zip(init.head.state_dict().values(), model.head.state_dict().values())]
    assert any(moved)


@pytest.mark.unit
def test_a_failing_rank_ends_the_run_with_its_error(data, micro_cfg, tmp_path):
    """A non-finite loss on one rank stops both (the finiteness check is collective), and the
    error comes back to the caller instead of a hang."""
    cfg = _cfg(ranks=2, lr=float("1e30"), warmup=1, grad_clip=1e30, steps=40, checkpoint_every=100)
    with pytest.raises(Exception, match="non-finite loss"):
        fit_data_parallel(cfg, tmp_path / "bad", data=data, model_cfg=micro_cfg)


@pytest.mark.unit
def test_the_train_command_names_a_bad_dataset_before_spawning_ranks(tmp_path):
    from vam_cli.main import main
    from vam_stack.paths import config_dir
    from vam_data.dataset import DatasetError

    with pytest.raises(DatasetError, match="'no/such/dir' is not a dataset"):
        main(["train", "--config", str(config_dir() / "train_yam64.yaml"), "--dataset", "no/such/dir",
              "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()
