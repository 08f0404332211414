"""One data-parallel mechanism: ranks join from the torch.distributed environment, whether torchrun set it
(GPUs: NCCL; here two gloo processes on the CPU) or `vam-stack train` spawned them; activation checkpointing
gives the gradients of the plain backward pass."""
import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from vam_stack.config import ConfigError, to_dict
from vam_stack.paths import config_dir
from vam_train.distributed import run_rank, torchrun_env
from vam_train.train import TrainConfig

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_env(monkeypatch):
    for v in ENV:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_the_environment_is_read_whole_or_refused(clean_env):
    assert torchrun_env() is None
    clean_env.setenv("RANK", "1")
    with pytest.raises(ValueError, match=r"incomplete: \['RANK'\] set"):
        torchrun_env()
    for k, v in dict(WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="1").items():
        clean_env.setenv(k, v)
    assert torchrun_env() == {"rank": 1, "world": 2, "local": 1}
    clean_env.setenv("RANK", "2")
    with pytest.raises(ValueError, match="do not describe a rank"):
        torchrun_env()


def test_a_config_that_disagrees_with_the_launcher_is_refused_before_joining(clean_env):
    for k, v in dict(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="1").items():
        clean_env.setenv(k, v)
    with pytest.raises(ConfigError, match="train.ranks=4 but torchrun started 2 processes"):
        run_rank(TrainConfig(ranks=4, batch=4), "unused")
    with pytest.raises(ConfigError, match="train.batch=3 must split evenly over the 2 ranks"):
        run_rank(TrainConfig(batch=3), "unused")


def test_ranks_on_gpus_without_torchrun_point_to_it(clean_env, tmp_path):
    from vam_cli.main import main

    if torch.cuda.is_available():
        with pytest.raises(ConfigError, match="launch one process per GPU with torchrun"):
            main(["train", "--config", str(config_dir() / "train_tiny.yaml"), "--set", "ranks=2", "--device", "cuda",
                  "--out", str(tmp_path / "r")])
    else:
        with pytest.raises(ConfigError, match="sees no GPU"):
            main(["train", "--config", str(config_dir() / "train_tiny.yaml"), "--set", "ranks=2", "--device", "cuda",
                  "--out", str(tmp_path / "r")])


@pytest.mark.slow
def test_torchrun_starts_two_gloo_ranks_that_train_resume_and_export(data, micro_cfg, tmp_path, clean_env):
    model_yaml = tmp_path / "micro.yaml"
    model_yaml.write_text(yaml.safe_dump(to_dict(micro_cfg)))
    out = tmp_path / "run"

    def torchrun(steps, *extra):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "vam_cli.main", "train", "--config", str(config_dir() / "train_tiny.yaml"),
               "--dataset", str(data.root), "--steps", str(steps), "--out", str(out),
               "--set", f"preset={model_yaml}", "--set", "threads=1", "--set", "batch=4", "--set", "checkpoint_every=2",
               "--set", "log_every=1", "--set", "warmup=1", "--set", "joint_frac=1.0", "--set",
               "activation_checkpointing=true", "--set", "loss.action_samples=2", *extra]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)

    r = torchrun(2)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "trained to step 2 in " in r.stdout and " on 2 ranks (gloo); last step's losses: " in r.stdout, r.stdout
    assert json.loads((out / "config.json").read_text())["ranks"] == 2
    r = torchrun(4, "--resume")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "resumed at step 2" in r.stdout
    steps = [json.loads(s)["step"] for s in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert torch.load(out / "train_state.pt", weights_only=True)["step"] == 4
    assert (out / "model.safetensors").is_file()


def test_activation_checkpointing_gives_the_same_gradients(micro_model, micro_cfg):
    import copy

    torch.manual_seed(0)
    x = torch.randn(2, 16, 5, 8, 16)
    mask = torch.zeros(2, 1, 5, 8, 16)
    sf, text = torch.full((2, 5), 0.5), torch.randn(2, 32, micro_cfg.dit.text_dim)
    grads = []
    for on in (False, True):
        dit = copy.deepcopy(micro_model.dit).train()
        dit.activation_checkpointing = on
        v, feats = dit.velocity_and_features(x, mask, sf, text, block=micro_cfg.dit.feature_block)
        (v.square().mean() + feats.square().mean()).backward()
        grads.append([p.grad.clone() for p in dit.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 10
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
