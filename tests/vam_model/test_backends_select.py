"""Backend selection by config, the no-CUDA errors, the TensorRT engine-cache key, parity measure.

No GPU here: the TensorRT backend is exercised for its error path and its cache-key and
profile logic only; engine builds and TensorRT parity are checked by scripts/gpu_check.sh.
"""
import dataclasses
import json

import pytest
import torch

from vam_model.backends import BackendConfig, BackendUnavailable, DiTBackend, make_backend, parity, within_bounds
from vam_model.backends.ort_backend import ensure_onnx
from vam_model.backends.tensorrt_backend import EngineKey, profile_shapes, require_tensorrt
from vam_model.backends.torch_backend import TorchBackend
from vam_model.export import config_hash, example_inputs, weights_hash
from vam_model.policy import PolicyConfig
from vam_stack.config import ConfigError, from_dict

pytestmark = pytest.mark.unit
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="tests the error on a machine without CUDA")


def test_default_backend_is_torch_eager(micro_model):
    b = make_backend(BackendConfig(), micro_model)
    assert isinstance(b, TorchBackend) and isinstance(b, DiTBackend)
    assert b.describe() == {"backend": "torch", "head": "torch", "compile": False, "device": "cpu"}
    ex = example_inputs(micro_model.cfg, batch=1)
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    with torch.no_grad():
        assert torch.equal(b.velocity(*args), micro_model.dit.velocity(*args))
        assert torch.equal(b.features(*args), micro_model.dit.features(*args))


def test_policy_config_selects_backend_from_yaml_dict():
    cfg = from_dict(PolicyConfig, {"backend": {"name": "onnxruntime", "device": "cpu", "threads": 2}})
    assert cfg.backend.name == "onnxruntime" and cfg.backend.threads == 2
    assert PolicyConfig().backend.name == "torch"
    with pytest.raises(ConfigError, match="'onnx'"):
        from_dict(PolicyConfig, {"backend": {"name": "onnx"}})


@pytest.mark.parametrize("kw,bad", [({"name": "trt"}, "'trt'"), ({"precision": "int4"}, "'int4'"),
                                    ({"device": "gpu"}, "'gpu'"), ({"max_batch": 0}, "0"), ({"builder_level": 7}, "7"),
                                    ({"compile": True, "name": "onnxruntime"}, "'onnxruntime'")])
def test_backend_config_rejects_bad_values(kw, bad):
    with pytest.raises(ConfigError, match=bad):
        BackendConfig(**kw)


@no_cuda
def test_tensorrt_without_cuda_is_a_clear_error(micro_model, tmp_path):
    with pytest.raises(BackendUnavailable, match="needs an NVIDIA GPU with CUDA"):
        make_backend(BackendConfig(name="tensorrt", cache_dir=str(tmp_path)), micro_model)
    with pytest.raises(BackendUnavailable, match="torch.cuda.is_available\\(\\) is False"):
        require_tensorrt()
    assert not any(tmp_path.iterdir())                                 # nothing exported or built first


def test_onnxruntime_cuda_without_provider_is_a_clear_error(micro_model):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA")
    with pytest.raises(BackendUnavailable, match="no CUDAExecutionProvider"):
        make_backend(BackendConfig(name="onnxruntime", device="cuda"), micro_model)


def _key(**kw):
    base = dict(gpu="NVIDIA H200", tensorrt="10.13.0", preset="real", weights_hash="0123456789abcdef",
                precision="bf16", graph="dit_features", builder_level=3, max_batch=4, max_frames=24, onnx_sha="fedcba9876543210")
    return EngineKey(**{**base, **kw})


def test_engine_key_changes_with_each_input():
    k = _key()
    assert k.digest() == _key().digest()                               # deterministic
    changed = {"gpu": "NVIDIA A100-SXM4-80GB", "tensorrt": "11.4.0", "preset": "libero",
               "weights_hash": "0123456789abcdee", "precision": "fp8", "graph": "dit_velocity", "builder_level": 1,
               "max_batch": 8, "max_frames": 7, "onnx_sha": "fedcba9876543211"}
    assert set(changed) == {f.name for f in dataclasses.fields(EngineKey)}
    digests = {k.digest()}
    for field, value in changed.items():
        d = dataclasses.replace(k, **{field: value}).digest()
        assert d not in digests, field
        digests.add(d)
    assert k.filename() == f"real-dit_features-bf16-{k.digest()}.engine"


def test_weights_hash_is_the_checkpoint_identity(micro_model):
    h = weights_hash(micro_model.dit)
    assert h == weights_hash(micro_model.dit) and len(h) == 16
    p = next(micro_model.dit.parameters())
    with torch.no_grad():
        p.view(-1)[0] += 1e-3
        try:
            assert weights_hash(micro_model.dit) != h
        finally:
            p.view(-1)[0] -= 1e-3


def test_profile_shapes_cover_plan_rollout_and_batch(tiny_cfg):
    s = profile_shapes(tiny_cfg, max_batch=4)
    assert s["x"] == ((1, 16, 2, 28, 56), (1, 16, 5, 28, 56), (4, 16, 7, 28, 56))
    assert s["sigma_frames"][2] == (4, 7) and s["text"][1] == (1, 32, 64)
    assert set(s) == {"x", "mask", "sigma_frames", "text"}


def test_ensure_onnx_refuses_foreign_manifest(micro_model, tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"preset": "libero", "weights_hash": "x", "dtype": "fp32"}))
    with pytest.raises(ValueError, match="preset 'libero'"):
        ensure_onnx(micro_model, BackendConfig(name="onnxruntime", onnx_dir=str(tmp_path)))
    own = {"preset": "micro", "weights_hash": weights_hash(micro_model.dit), "feature_block": 2}
    (tmp_path / "manifest.json").write_text(json.dumps(own | {"dtype": "fp32"}))     # an export older than the config hash
    with pytest.raises(ValueError, match="model config None .feature block 2.*export again"):
        ensure_onnx(micro_model, BackendConfig(name="onnxruntime", onnx_dir=str(tmp_path)))
    own["config_hash"] = config_hash(micro_model.cfg)
    (tmp_path / "manifest.json").write_text(json.dumps(own | {"dtype": "fp16"}))
    with pytest.raises(ValueError, match="'fp16'"):
        ensure_onnx(micro_model, BackendConfig(name="onnxruntime", onnx_dir=str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="vam-stack export onnx"):
        ensure_onnx(micro_model, BackendConfig(name="onnxruntime", onnx_dir=str(tmp_path / "none")))


def test_concurrent_exports_never_expose_a_half_written_graph(tmp_path):
    """Two eval workers on an empty cache both export: each writes its graph in a private partial folder
    and moves it in; the manifest lists a graph only once its file is complete, and keeps both graphs."""
    from vam_model.onnx_cache import commit_graph, read_manifest

    d = tmp_path / "onnx" / "micro-abc-def-fp32"
    header = {"preset": "micro", "weights_hash": "abc", "config_hash": "def", "dtype": "fp32"}
    for tag, graph in (("first", "dit_features"), ("second", "dit_velocity"), ("third", "dit_features")):
        tmp = d / f"{graph}.partial-{tag}"
        tmp.mkdir(parents=True)
        (tmp / f"{graph}.onnx").write_text(tag)
        commit_graph(d, graph, tmp, {"file": f"{graph}.onnx", "by": tag}, header)
    m = read_manifest(d)
    assert {k: v["by"] for k, v in m["graphs"].items()} == {"dit_features": "third", "dit_velocity": "second"}
    assert (d / "dit_features.onnx").read_text() == "third"
    assert sorted(p.name for p in d.iterdir()) == [".lock", "dit_features.onnx", "dit_velocity.onnx", "manifest.json"]


def test_graph_cache_is_keyed_by_config_not_only_weights(micro_model):
    """The same weights at another feature block k must not reuse the cached graphs: the DiT
    features graph bakes block k in, the head graph its TR layer."""
    other = dataclasses.replace(micro_model.cfg, dit=dataclasses.replace(micro_model.cfg.dit, feature_block=1))
    assert micro_model.cfg.dit.feature_block != 1
    assert config_hash(other) != config_hash(micro_model.cfg)
    assert config_hash(dataclasses.replace(micro_model.cfg)) == config_hash(micro_model.cfg)
    tr = dataclasses.replace(micro_model.cfg, head=dataclasses.replace(micro_model.cfg.head, tr_layer=1))
    assert config_hash(tr) != config_hash(micro_model.cfg)


def test_parity_measure_and_bounds():
    ref = torch.linspace(-1, 1, 1000)
    p = parity(ref + 1e-5, ref)
    assert p["cosine"] > 0.99999 and abs(p["max_abs"] - 1e-5) < 1e-7 and within_bounds(p, "fp32")
    bad = parity(ref.flip(0), ref)
    assert bad["cosine"] < 0 and not within_bounds(bad, "bf16")
    assert not within_bounds(parity(ref * 1.1, ref), "fp32")           # cosine 1, but 10 % off in magnitude
    with pytest.raises(ValueError, match="shapes differ"):
        parity(ref[:10], ref)


def test_head_engine_profiles_cover_the_batched_guidance_branches(tiny_cfg):
    """The head engines' profiles: batch 1 (cond alone) to max_batch (>= 3 guided branches), at
    the exported graphs' shapes (keys [layers, B, 1, Lp, hd], actions [B, A, D])."""
    from vam_model.backends.tensorrt_backend import head_profile_shapes

    shapes = head_profile_shapes(tiny_cfg, max_batch=4)
    h, r = tiny_cfg.head, tiny_cfg.robot
    lo, opt, hi = shapes["head_step"]["keys"]
    assert lo == opt == (h.layers, 1, h.kv_heads, tiny_cfg.head_video_tokens + 1, h.head_dim)
    assert hi[1] == 4 >= 3
    assert shapes["head_step"]["actions"][2] == (4, r.chunk, r.action_dim)
    assert shapes["head_prefix"]["features"][0] == (1, tiny_cfg.solver.latent_frames, tiny_cfg.dit_tokens_per_frame,
                                                     tiny_cfg.dit.width)
    assert set(shapes["head_prefix"]) == {"features", "sigma_v", "state"}
