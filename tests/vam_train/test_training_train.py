"""Trainer: resume equals an uninterrupted run, export loads into the policy, two-stage, LoRA."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from vam_data.dataset import Dataset
from vam_train.losses import LossConfig
from vam_train.train import TrainConfig, Trainer, load_train_config, merge_lora
from vam_stack.config import ConfigError


def _cfg(**kw):
    base = dict(steps=4, batch=2, warmup=1, ema=0.5, checkpoint_every=2, log_every=1, threads=1,
                loss=LossConfig(action_samples=2))
    return TrainConfig(**(base | kw))


@pytest.mark.unit
def test_resume_matches_an_uninterrupted_run(data, micro_cfg, tmp_path):
    full = Trainer(_cfg(), tmp_path / "full", data=data, model_cfg=micro_cfg)
    full.fit(progress=False)
    part = Trainer(_cfg(), tmp_path / "part", data=data, model_cfg=micro_cfg)
    part.fit(progress=False, stop_after=2)
    assert part.step == 2 and (tmp_path / "part" / "train_state.pt").is_file()
    resumed = Trainer(_cfg(), tmp_path / "part", data=data, model_cfg=micro_cfg)
    resumed.load_state()
    assert resumed.step == 2
    resumed.fit(progress=False)
    assert resumed.step == 4
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-5), name
    lines = (tmp_path / "part" / "log.jsonl").read_text().splitlines()
    assert [int(line.split('"step": ')[1].split(",")[0]) for line in lines] == [1, 2, 3, 4]


@pytest.mark.unit
def test_export_round_trips_into_the_policy(data, micro_cfg, tmp_path):
    from vam_model.policy import build_policy

    tr = Trainer(_cfg(steps=1), tmp_path / "run", data=data, model_cfg=micro_cfg)
    tr.fit(progress=False)
    policy = build_policy(checkpoint=tmp_path / "run" / "model.safetensors", guidance="none")
    assert policy.mcfg.name == "micro"
    from vam_sim.libero_mock.config import CONVENTIONS, LiberoMockConfig, checkpoint_conventions

    # the checkpoint says which mock it was trained on (sim warns when that is not the current one)
    assert checkpoint_conventions(tmp_path / "run" / "model.safetensors") == CONVENTIONS
    assert LiberoMockConfig.from_dict(data.info["mock"]) == LiberoMockConfig()
    mean, std = policy.stats["action"]
    np.testing.assert_allclose(mean, data.stats["action_mean"], rtol=1e-6)
    np.testing.assert_allclose(std, data.stats["action_std"], rtol=1e-6)
    np.testing.assert_allclose(policy.stats["proprio"][1], data.stats["proprio_std"], rtol=1e-6)
    shipped, live = policy.model.state_dict(), dict(tr.model.named_parameters())
    assert tr.ema and set(tr.ema) == {n for n, p in live.items() if p.requires_grad}
    for name, p in live.items():                                  # the EMA weights are what ships (the frozen
        assert torch.equal(shipped[name], tr.ema.get(name, p.detach()))   # ones are their own average)
        assert name not in tr.ema or not torch.equal(tr.ema[name], p.detach()) or name.startswith("tokenizer")
    policy.reset(data.instructions[0])
    r = micro_cfg.robot
    frame = np.zeros((r.image_height, r.image_width, 3), np.uint8)
    out = policy.infer({"frame": frame, "proprio": data.episodes[0].proprio[0]})
    assert out["actions"].shape == (17, 7) and np.isfinite(out["actions"]).all()


@pytest.mark.unit
def test_ema_shadows_only_trained_weights_and_resumes_from_an_old_full_copy(data, micro_cfg, micro_model, tmp_path):
    from vam_model.networks.checkpoint import save_checkpoint

    pre = save_checkpoint(tmp_path / "pretrained.safetensors", micro_model, micro_cfg)
    tr = Trainer(_cfg(init_from=str(pre), lora_rank=4, steps=2), tmp_path / "r", data=data, model_cfg=micro_cfg)
    live = dict(tr.model.named_parameters())
    shadowed = sum(v.numel() for v in tr.ema.values())
    assert shadowed < 0.8 * sum(p.numel() for p in live.values())        # the frozen DiT is not copied
    assert not any(n.startswith("dit.") and "lora_" not in n for n in tr.ema)
    tr.fit(progress=False, stop_after=1)
    before = {n: p.detach().clone() for n, p in live.items()}
    tr.export(tmp_path / "a.safetensors")
    assert all(torch.equal(before[n], p.detach()) for n, p in live.items())   # export puts the live weights back
    # a train_state.pt written before (the EMA as a whole model's state dict) still resumes
    state = torch.load(tr.state_path, weights_only=True)
    full = {n: tr.ema.get(n, p.detach()).clone() for n, p in live.items()}
    state["ema"] = full
    torch.save(state, tr.state_path)
    again = Trainer(_cfg(init_from=str(pre), lora_rank=4, steps=2), tmp_path / "r", data=data, model_cfg=micro_cfg)
    again.load_state()
    assert set(again.ema) == set(tr.ema) and all(torch.equal(again.ema[n], tr.ema[n]) for n in tr.ema)


@pytest.mark.unit
def test_two_stage_trains_video_then_only_the_head(data, micro_cfg, tmp_path):
    tr = Trainer(_cfg(mode="two_stage", stage1_steps=1, steps=1, ema=0.0), tmp_path / "r", data=data,
                 model_cfg=micro_cfg)
    head0 = [p.detach().clone() for p in tr.model.head.parameters()]
    tr.fit(progress=False, stop_after=1)
    assert tr.stage == "video"
    assert all(torch.equal(a, b) for a, b in zip(head0, tr.model.head.parameters()))   # stage 1: no head update
    dit1 = [p.detach().clone() for p in tr.model.dit.parameters()]
    tr.fit(progress=False)
    assert tr.stage == "head" and tr.step == 2
    assert all(torch.equal(a, b) for a, b in zip(dit1, tr.model.dit.parameters()))     # stage 2: DiT frozen
    assert not all(torch.equal(a, b) for a, b in zip(head0, tr.model.head.parameters()))


@pytest.mark.unit
def test_a_new_head_at_another_feature_block_on_a_pretrained_dit(data, micro_cfg, micro_model, tmp_path):
    """head_from_init + feature_block: the DiT is the checkpoint's, the head a fresh seeded init, and
    the exported checkpoint (and so the policy) reads the new block k."""
    from vam_model.networks.checkpoint import load_checkpoint, read_metadata, save_checkpoint

    import copy

    trained = copy.deepcopy(micro_model)                                  # a "pretrained" head unlike the init
    with torch.no_grad():
        for p in trained.head.parameters():
            p.add_(0.01)
    pre = save_checkpoint(tmp_path / "pretrained.safetensors", trained, micro_cfg)
    k = micro_cfg.dit.feature_block - 1
    cfg = _cfg(init_from=str(pre), head_from_init=True, feature_block=k, mode="two_stage", steps=1, ema=0.0)
    tr = Trainer(cfg, tmp_path / "r", data=data, model_cfg=micro_cfg)
    assert tr.mcfg.dit.feature_block == k
    for name, t in micro_model.dit.state_dict().items():
        assert torch.equal(t, tr.model.dit.state_dict()[name]), name
    fresh = Trainer(_cfg(steps=1, ema=0.0), tmp_path / "fresh", data=data, model_cfg=micro_cfg)
    for name, t in fresh.model.head.state_dict().items():                 # the seeded init, not the checkpoint's
        assert torch.equal(t, tr.model.head.state_dict()[name]), name
    assert not any(torch.equal(t, trained.head.state_dict()[n]) for n, t in tr.model.head.state_dict().items()
                   if t.is_floating_point() and t.numel())
    tr.fit(progress=False)
    cfg_out, extra = read_metadata(tr.export(tmp_path / "k.safetensors"))
    assert cfg_out.dit.feature_block == k and extra["training"]["head_from_init"] is True
    assert extra["training"]["feature_block"] == k
    load_checkpoint(tmp_path / "k.safetensors", micro_model.__class__(cfg_out))
    with pytest.raises(ConfigError, match="head_from_init=True needs init_from"):
        TrainConfig(head_from_init=True)
    with pytest.raises(ConfigError, match="feature_block must be an integer >= 0"):
        TrainConfig(feature_block=-1)
    with pytest.raises(ConfigError, match="feature_block"):               # the DiT's own range check
        Trainer(_cfg(feature_block=micro_cfg.dit.layers + 1), tmp_path / "bad", data=data, model_cfg=micro_cfg)


@pytest.mark.unit
def test_lora_wraps_the_dit_projections_and_merges_back(data, micro_cfg, micro_model, tmp_path):
    from peft.tuners.lora import LoraLayer

    from vam_model.networks.checkpoint import save_checkpoint

    pre = save_checkpoint(tmp_path / "pretrained.safetensors", micro_model, micro_cfg)
    tr = Trainer(_cfg(init_from=str(pre), lora_rank=4, steps=1, ema=0.0), tmp_path / "r", data=data,
                 model_cfg=micro_cfg)
    blk = tr.model.dit.model.transformer_blocks[0]
    for mod in (blk.attn1.to_q, blk.attn1.to_k, blk.attn1.to_v, blk.attn1.to_out[0], blk.attn2.to_q,
                blk.ff.net[0].proj, blk.ff.net[2]):
        assert isinstance(mod, LoraLayer)
    trainable = {n for n, p in tr.model.dit.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    tr.fit(progress=False)
    from vam_model.networks.checkpoint import read_metadata

    _, extra = read_metadata(tr.export(tmp_path / "lora.safetensors"))   # the checkpoint says how it was made
    assert extra["training"]["lora_rank"] == 4 and extra["training"]["init_from"] == str(pre)
    merged = merge_lora(tr.model)
    assert set(merged.state_dict()) == set(micro_model.state_dict())
    x = torch.randn(1, 16, 5, 8, 16)
    mask = torch.zeros(1, 1, 5, 8, 16)
    sf, text = torch.full((1, 5), 0.5), torch.randn(1, 32, micro_cfg.dit.text_dim)
    with torch.no_grad():
        assert torch.allclose(tr.model.dit.velocity(x, mask, sf, text), merged.dit.velocity(x, mask, sf, text),
                              atol=1e-5)
    assert not torch.allclose(merged.dit.model.transformer_blocks[0].attn1.to_q.weight,
                              micro_model.dit.model.transformer_blocks[0].attn1.to_q.weight)


@pytest.mark.unit
def test_train_config_validates_and_the_shipped_yaml_loads():
    from vam_stack.paths import config_dir

    with pytest.raises(ConfigError, match="init_from"):
        TrainConfig(lora_rank=8)
    with pytest.raises(ConfigError, match="'both'"):
        TrainConfig(mode="both")
    cfg = load_train_config(Path(config_dir()) / "train_tiny.yaml", {"steps": 7})
    assert cfg.steps == 7 and cfg.loss.video_weight == 1.0 and cfg.loss.beta_a == 1.5
    assert cfg.recovery.at == () and cfg.recovery.weight == 2.0   # the shipped model trained without rounds
    with pytest.raises(ConfigError, match="did you mean"):
        load_train_config(Path(config_dir()) / "train_tiny.yaml", {"stepz": 1})


@pytest.mark.unit
def test_one_train_config_per_preset_with_variants_and_command_line_sets(tmp_path):
    import yaml

    from vam_stack.paths import config_dir
    from vam_train.train import parse_sets

    shipped = sorted(Path(config_dir()).glob("train_*.yaml"))
    presets = [yaml.safe_load(f.read_text())["train"]["preset"] for f in shipped]
    assert len(presets) == len(set(presets)), f"more than one training config for a preset: {shipped}"
    for f in shipped:                                  # every variant of every shipped config validates
        for v in [None, *(yaml.safe_load(f.read_text()).get("variants") or {})]:
            load_train_config(f, {}, variant=v)
    yam = Path(config_dir()) / "train_yam64.yaml"
    base, eighth = load_train_config(yam, {}), load_train_config(yam, {}, variant="eighth")
    assert base.extra_datasets == ("runs/demos_yam_regrasp101", "runs/demos_yam_late102")
    assert eighth.extra_datasets == ("runs/demos_yam_regrasp101",) and eighth.loss == base.loss
    assert load_train_config(yam, {}, variant="second").loss.action_samples == 8   # nested keys merge
    with pytest.raises(ConfigError, match=r"no variant 'tenth' \(variants: \['eighth', 'fifth'"):
        load_train_config(yam, {}, variant="tenth")
    sets = parse_sets(["loss.action_samples=2", "lr=2e-3", "extra_datasets=[]"])
    cfg = load_train_config(yam, {"steps": 5}, sets=sets)
    assert (cfg.loss.action_samples, cfg.lr, cfg.extra_datasets, cfg.steps) == (2, 2e-3, (), 5)
    assert cfg.loss.beta_a == base.loss.beta_a                      # the rest of loss kept
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_sets(["lr"])
    with pytest.raises(ConfigError, match="did you mean"):
        load_train_config(yam, {}, sets=parse_sets(["lrr=1"]))
    extra = tmp_path / "t.yaml"
    extra.write_text("train: {preset: tiny}\nvarints: {}\n")
    with pytest.raises(ConfigError, match=r"unknown sections \['varints'\]"):
        load_train_config(extra, {})


@pytest.mark.unit
def test_head_text_path_trains_only_the_text_route_of_the_dit(data, micro_cfg, tmp_path):
    tr = Trainer(_cfg(mode="two_stage", stage1_steps=0, steps=1, ema=0.0, head_text_path=True, feature_reuse=1),
                 tmp_path / "r", data=data, model_cfg=micro_cfg)
    k = micro_cfg.dit.feature_block
    trainable = {n for n, p in tr.model.dit.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.crossattn_proj.", f"model.transformer_blocks.{k - 1}.attn2."))
                             for n in trainable)
    before = {n: p.detach().clone() for n, p in tr.model.dit.named_parameters()}
    tr.fit(progress=False)
    for n, p in tr.model.dit.named_parameters():
        assert torch.equal(before[n], p) != (n in trainable), n
    with pytest.raises(ConfigError, match="feature_reuse"):
        TrainConfig(head_text_path=True, feature_reuse=2)


@pytest.mark.unit
def test_planning_weight_oversamples_planning_steps(data, micro_cfg, tmp_path):
    from vam_train.train import Batches

    phase = np.concatenate([e.phase for e in data.episodes])
    base = 1.0 - phase.mean()                                 # planning share of the recorded steps
    b = Batches(data, _cfg(planning_weight=4.0, batch=64), {}, 17, 17, (224, 448))
    picked = np.concatenate([np.random.default_rng([0, s]).choice(len(data), 64, p=b.p) for s in range(40)])
    share = float((phase[picked] == 0).mean())
    expect = 4 * base / (4 * base + (1 - base))
    assert abs(share - expect) < 0.05 and share > base + 0.1
    assert Batches(data, _cfg(), {}, 17, 17, (224, 448)).p is None
    with pytest.raises(ConfigError, match="planning_weight"):
        TrainConfig(planning_weight=0.0)


@pytest.mark.unit
def test_no_sample_starts_before_an_episodes_train_from(data, micro_cfg, tmp_path):
    """A re-grasp demonstration's scripted miss (steps before `train_from`) is never a sample start."""
    from vam_train.train import Batches

    ep = data.episodes[0]
    start = len(ep) // 2
    ep.meta["train_from"] = start
    try:
        b = Batches(data, _cfg(batch=64), {}, 17, 17, (224, 448))
        assert b.p is not None and np.all(b.p[:start] == 0) and np.all(b.p[start:] > 0)
        picked = np.concatenate([np.random.default_rng([0, s]).choice(len(data), 64, p=b.p) for s in range(20)])
        steps = [data.locate(int(i)) for i in picked]
        assert all(t >= start for e, t in steps if e == 0) and any(e == 0 for e, _ in steps)
    finally:
        del ep.meta["train_from"]


@pytest.mark.unit
def test_libero64_preset_keeps_every_mechanism_on_a_small_token_geometry():
    from vam_model.networks.config import load_config

    small, tiny = load_config("libero64"), load_config("tiny")
    assert (small.robot.camera_width, small.robot.camera_height) == (64, 64)
    assert small.head_tokens_per_frame == 32 and small.head_video_tokens == 160
    # everything but the view size and the head's token grouping is tiny's
    assert small.dit == tiny.dit and small.solver == tiny.solver and small.tokenizer == tiny.tokenizer
    assert dataclasses.replace(small.head, video_group=tiny.head.video_group) == tiny.head
    assert small.robot.chunk == 17 and small.robot.execute == 10 and small.robot.control_hz == 20.0


@pytest.mark.unit
def test_training_on_libero64_fits_the_224_px_frames_once_into_memory(data, tmp_path):
    from vam_stack.views import fit_views
    from vam_model.networks.config import load_config

    cfg = load_config("libero64")
    copy = Dataset(data.root)
    tr = Trainer(_cfg(steps=1, cache_frames=True, preset="libero64"), tmp_path / "run", data=copy, model_cfg=cfg)
    ep = copy.episodes[0]
    assert ep.decoded.shape == (len(ep), 64, 128, 3)                    # held at the model's size
    np.testing.assert_array_equal(ep.decoded[3], fit_views(data.episodes[0].frame(3), 2, 64, 64))
    tr.fit(progress=False)
    assert (tmp_path / "run" / "model.safetensors").is_file()


@pytest.mark.unit
def test_video_mode_pretrains_the_dit_and_leaves_the_head_at_init(data, micro_cfg, tmp_path):
    tr = Trainer(_cfg(mode="video", steps=2, ema=0.0), tmp_path / "r", data=data, model_cfg=micro_cfg)
    head0 = [p.detach().clone() for p in tr.model.head.parameters()]
    dit0 = [p.detach().clone() for p in tr.model.dit.parameters()]
    out = tr.fit(progress=False)
    assert tr.stage == "video" and "action" not in out and out["video"] > 0
    assert all(torch.equal(a, b) for a, b in zip(head0, tr.model.head.parameters()))
    assert sum(not torch.equal(a, b) for a, b in zip(dit0, tr.model.dit.parameters())) > len(dit0) // 2
    with pytest.raises(ConfigError, match="'video'"):
        TrainConfig(mode="video", init_from="x.safetensors", lora_rank=2)


@pytest.mark.unit
def test_dit_lr_scale_slows_only_the_dits_own_weights(data, micro_cfg, micro_model, tmp_path):
    from vam_model.networks.checkpoint import save_checkpoint

    pre = save_checkpoint(tmp_path / "pretrained.safetensors", micro_model, micro_cfg)
    tr = Trainer(_cfg(init_from=str(pre), dit_lr_scale=0.1, steps=2, warmup=1), tmp_path / "r", data=data,
                 model_cfg=micro_cfg)
    groups = tr.opt.param_groups
    assert [g["lr_scale"] for g in groups] == [1.0, 0.1]
    dit = {id(p) for p in tr.model.dit.parameters()}
    assert all(id(p) in dit for p in groups[1]["params"]) and not any(id(p) in dit for p in groups[0]["params"])
    tr.fit(progress=False)
    assert groups[1]["lr"] == pytest.approx(0.1 * groups[0]["lr"])
    with pytest.raises(ConfigError, match="dit_lr_scale"):
        TrainConfig(dit_lr_scale=0.0)
    with pytest.raises(ConfigError, match="dit_lr_scale"):
        TrainConfig(dit_lr_scale=float("inf"))


@pytest.mark.unit
def test_lora_head_stage_trains_the_head_and_the_text_routes_adapters_only(data, micro_cfg, micro_model, tmp_path):
    from vam_model.networks.checkpoint import save_checkpoint

    pre = save_checkpoint(tmp_path / "pretrained.safetensors", micro_model, micro_cfg)
    tr = Trainer(_cfg(init_from=str(pre), lora_rank=2, joint_frac=0.5, steps=2, ema=0.0, head_text_path=True,
                      feature_reuse=1), tmp_path / "r", data=data, model_cfg=micro_cfg)
    tr.fit(progress=False)
    assert tr.stage == "head"
    k = micro_cfg.dit.feature_block
    trainable = {n for n, p in tr.model.dit.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n and n.startswith(f"model.transformer_blocks.{k - 1}.attn2.")
                             for n in trainable)
    in_opt = {id(p) for g in tr.opt.param_groups for p in g["params"]}
    assert {id(p) for p in tr.model.head.parameters()} <= in_opt
    assert not any(id(p) in in_opt for n, p in tr.model.dit.named_parameters() if "lora_" not in n)


@pytest.mark.unit
def test_a_fresh_run_never_writes_over_an_earlier_one(tmp_path):
    """`vam-stack train --out` holding a train_state.pt or model.safetensors: refused before
    anything loads, unless --resume or --overwrite (which starts the log anew)."""
    from vam_cli.main import main
    from vam_train.train import claim_run_dir

    out = tmp_path / "run"
    claim_run_dir(out, resume=False, overwrite=False)              # absent: fine, nothing created
    assert not out.exists()
    out.mkdir()
    (out / "log.jsonl").write_text("")
    claim_run_dir(out, resume=False, overwrite=False)              # an empty log: nothing to lose
    (out / "log.jsonl").write_text('{"step": 5}\n')                # a run's lines (issue 70 row 5: appended to)
    with pytest.raises(FileExistsError, match=r"log.jsonl \(1 lines\) but no checkpoint.*--overwrite"):
        claim_run_dir(out, resume=False, overwrite=False)
    (out / "model.safetensors").write_bytes(b"earlier")
    with pytest.raises(FileExistsError, match=r"holds an earlier run \(model.safetensors\).*--resume.*--overwrite"):
        main(["train", "--dataset", "no/such/dir", "--out", str(out)])
    assert (out / "model.safetensors").read_bytes() == b"earlier" and (out / "log.jsonl").is_file()
    with pytest.raises(ConfigError, match="pass one of them"):
        claim_run_dir(out, resume=True, overwrite=True)
    claim_run_dir(out, resume=True, overwrite=False)
    assert (out / "log.jsonl").is_file()                           # a resumed run appends to its log
    claim_run_dir(out, resume=False, overwrite=True)
    assert not (out / "log.jsonl").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        claim_run_dir(tmp_path / "file", resume=False, overwrite=False)


@pytest.mark.unit
def test_a_non_finite_loss_stops_the_run_naming_the_step(data, micro_cfg, tmp_path):
    tr = Trainer(_cfg(lr=1e30, grad_clip=1e30, steps=40, checkpoint_every=100), tmp_path / "r", data=data,
                 model_cfg=micro_cfg)
    with pytest.raises(FloatingPointError, match=r"non-finite loss at step \d+ \(mean over ranks: \[.*(nan|inf)"):
        tr.fit(progress=False)


@pytest.mark.unit
def test_extra_datasets_join_the_first_and_mismatches_are_refused(tmp_path):
    import json

    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert
    from vam_sim.collect import bridge_info
    from vam_data.dataset import write_dataset
    from vam_train.train import load_train_data

    info = bridge_info(LiberoMockConfig())
    a = write_dataset(tmp_path / "a", [rollout_expert("goal", 1, 0, 9)], info)
    b = write_dataset(tmp_path / "b", [rollout_expert("goal", 1, 1, 9), rollout_expert("goal", 1, 2, 9)], info)
    c = write_dataset(tmp_path / "c", [rollout_expert("goal", 6, 0, 9)], info)     # another instruction
    data = load_train_data(TrainConfig(dataset=str(a), extra_datasets=(str(b),)))
    assert len(data.episodes) == 3 and len(data) == len(Dataset(a)) + len(Dataset(b))
    assert data.stats == Dataset(a).stats                     # the first dataset's normalisation stays
    with pytest.raises(ValueError, match="instructions"):
        load_train_data(TrainConfig(dataset=str(a), extra_datasets=(str(c),)))
    meta = Path(b) / "meta" / "info.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"frame_shape": [48, 192, 3]}))
    with pytest.raises(ConfigError, match="frame_shape"):
        load_train_data(TrainConfig(dataset=str(a), extra_datasets=(str(b),)))
    with pytest.raises(ConfigError, match="extra_datasets"):
        TrainConfig(dataset=str(a), extra_datasets=(str(a),))
    with pytest.raises(ValueError, match="not a dataset"):
        load_train_data(TrainConfig(dataset=str(a), extra_datasets=(str(tmp_path / "missing"),)))


@pytest.mark.unit
def test_a_head_trained_on_a_committed_prefix_is_marked_for_trained_rtc(data, micro_cfg, tmp_path):
    """The prefix objective in both stages that train the head; the checkpoint records its largest
    delay and the policy then offers the trained method (a plain run's policy does not); a delay
    with no free action left is refused before anything trains."""
    from vam_model.policy import build_policy

    loss = LossConfig(action_samples=2, prefix_prob=0.5, prefix_max=4)
    for mode, kw in (("joint", {}), ("two_stage", {"stage1_steps": 0})):
        tr = Trainer(_cfg(steps=1, mode=mode, loss=loss, **kw), tmp_path / mode, data=data, model_cfg=micro_cfg)
        tr.fit(progress=False)
        policy = build_policy(checkpoint=tmp_path / mode / "model.safetensors", guidance="none")
        assert policy.rtc_prefix_max == 4 and policy.rtc_methods == ("guided", "trained")
    Trainer(_cfg(steps=1), tmp_path / "plain", data=data, model_cfg=micro_cfg).fit(progress=False)
    assert build_policy(checkpoint=tmp_path / "plain" / "model.safetensors").rtc_methods == ("guided",)
    with pytest.raises(ConfigError, match="prefix_max 17 must be below the chunk of 17"):
        Trainer(_cfg(loss=LossConfig(prefix_prob=0.5, prefix_max=17)), tmp_path / "long", data=data, model_cfg=micro_cfg)
