"""End-to-end closed loop: `vam-stack sim` with the tiny policy and with the expert."""
import json

import pytest

from vam_sim.libero_mock.runner import SimConfig
from vam_cli.main import main
from vam_stack.config import ConfigError


@pytest.mark.unit
def test_sim_config_errors():
    with pytest.raises(ConfigError, match="'gaol'"):
        SimConfig(suite="gaol")
    with pytest.raises(ConfigError, match="max_steps"):
        SimConfig(max_steps=0)
    with pytest.raises(ConfigError, match="execute must be an int >= 1, got 0"):
        SimConfig(execute=0)
    with pytest.raises(ConfigError, match="device must be one of .*got 'gpu'"):
        SimConfig(device="gpu")
    with pytest.raises(ConfigError, match="backend must be one of .*got 'tflite'"):
        SimConfig(backend="tflite")
    with pytest.raises(ConfigError, match="the 'expert' policy has none"):
        SimConfig(policy="expert", device="cpu")


@pytest.mark.unit
def test_sim_image_transport_options_are_validated():
    assert (SimConfig().image_transport, SimConfig().jpeg_quality) == ("raw", 95)
    with pytest.raises(ConfigError, match="image_transport must be one of \\('raw', 'compressed'\\), got 'jpeg'"):
        SimConfig(image_transport="jpeg")
    for bad in (0, 101, 90.0, True):
        with pytest.raises(ConfigError, match=f"jpeg_quality must be an integer in \\[1, 100\\], got {bad!r}"):
            SimConfig(image_transport="compressed", jpeg_quality=bad)
    with pytest.raises(ConfigError, match="jpeg_quality 75 is a setting of image_transport 'compressed'"):
        SimConfig(jpeg_quality=75)
    with pytest.raises(ConfigError, match="the scripted expert reads no images"):
        SimConfig(policy="expert", image_transport="compressed")
    assert SimConfig(image_transport="compressed", jpeg_quality=1).jpeg_quality == 1
    with pytest.raises(SystemExit, match="options of the LIBERO robots"):
        main(["sim", "--robot", "yam-mujoco", "--image-transport", "compressed", "--out", "unused"])
    with pytest.raises(SystemExit, match="--suite 'goal' is for the LIBERO robots"):   # never silently ignored
        main(["sim", "--robot", "yam-mujoco", "--suite", "goal", "--out", "unused"])


@pytest.mark.sim
def test_sim_compressed_transport_jpeg_round_trips_every_frame_the_policy_sees(tmp_path, monkeypatch):
    import numpy as np

    from vam_stack import image_msgs
    from vam_stack.recording import read_messages

    seen, real = [], image_msgs.jpeg_roundtrip

    def spy(image, quality=image_msgs.JPEG_QUALITY_DEFAULT):
        out = real(image, quality)
        seen.append((image.shape, quality, float(np.abs(out.astype(int) - image).mean())))
        return out
    monkeypatch.setattr(image_msgs, "jpeg_roundtrip", spy)
    out = tmp_path / "jpeg"
    assert main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--guidance", "none",
                 "--max-steps", "3", "--image-transport", "compressed", "--jpeg-quality", "60", "--out", str(out)]) == 0
    cfg = json.loads((out / "summary.json").read_text())["config"]
    assert (cfg["image_transport"], cfg["jpeg_quality"]) == ("compressed", 60)
    assert len(seen) == 3 and all(shape == (224, 448, 3) and q == 60 for shape, q, _ in seen)
    assert all(0 < err < 10 for _, _, err in seen), "the frames were not JPEG-degraded, or far too much"
    frames = list(read_messages(out / "recording.mcap", ["/camera/stacked/image_raw"]))
    assert len(frames) == 3                                   # recorded: what the policy saw


@pytest.mark.sim
def test_sim_device_and_backend_reach_the_policy(tmp_path, monkeypatch):
    out = tmp_path / "cpu"
    assert main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--guidance", "none",
                 "--max-steps", "3",
                 "--device", "cpu", "--backend", "torch", "--no-record", "--out", str(out)]) == 0
    cfg = json.loads((out / "summary.json").read_text())["config"]
    assert (cfg["device"], cfg["backend"]) == ("cpu", "torch")
    # no --backend on a CPU: onnxruntime for the vam policy (exported once per weights), torch for the expert
    for policy, backend in (("vam", "onnxruntime"), ("expert", "torch")):
        out = tmp_path / policy
        device = ["--device", "cpu"] if policy == "vam" else []          # the expert has no networks to place
        assert main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--guidance", "none",
                     "--max-steps", "3", *device, "--policy", policy, "--no-record", "--out", str(out)]) == 0
        assert json.loads((out / "summary.json").read_text())["config"]["backend"] == backend
    import vam_model.policy
    from vam_sim.episode import EpisodeRunner
    built = []
    monkeypatch.setattr(vam_model.policy, "build_policy", lambda *a, **kw: built.append(kw))
    EpisodeRunner.policy_for_run(None, "tiny", "tiny", "none", 0, device="cuda:1", backend="tensorrt")
    assert (built[0]["config"].device, built[0]["config"].backend.name) == ("cuda:1", "tensorrt")


@pytest.mark.sim
def test_sim_execute_overrides_the_replan_interval(tmp_path):
    out = tmp_path / "ex"
    assert main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--guidance", "none",
                 "--max-steps", "9",
                 "--execute", "4", "--no-record", "--out", str(out)]) == 0
    (ep,) = json.loads((out / "summary.json").read_text())["episodes"]
    assert [r["step"] for r in ep["replans"]] == [0, 4, 8]
    with pytest.raises(ConfigError, match="execute must be in \\[1, chunk=17\\], got 18"):
        main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--max-steps", "2", "--execute",
              "18", "--no-record", "--out", str(tmp_path / "bad")])


@pytest.mark.sim
def test_sim_default_policy_writes_summary_png_and_mcap(tmp_path, capsys):
    from vam_stack.recording import read_info, read_messages

    out = tmp_path / "run"
    rc = main(["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--seed", "0", "--guidance",
               "tr_adaptive", "--max-steps", "20", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "policy: libero64 preset" in text and "recording.mcap" in text
    from vam_stack.paths import models_dir
    if not (models_dir() / "libero64.safetensors").is_file():   # no shipped weights: the run must say so
        assert "RANDOM (untrained) weights" in text
    else:
        assert "WARNING" not in text                               # trained on the mock as it is
    assert "95 % interval" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["success_rate"]) == {"goal"}
    (ep,) = summary["episodes"]
    for key in ("suite", "task", "instruction", "seed", "success", "steps", "replans"):
        assert key in ep
    assert ep["steps"] == 20 and ep["termination"] == "timeout"
    assert ep["reach"]["object"] and 0.0 <= ep["reach"]["closest_xy_m"] < 1.0
    assert "reach: named object grasped in" in text
    assert [r["step"] for r in ep["replans"]] == [0, 10]
    for r in ep["replans"]:
        assert set(r) >= {"step", "tr", "tr0", "s", "w_lang", "w_plan", "branches_computed", "latency_ms"}
        assert r["branches_computed"][0] == "cond" and r["tr0"] == ep["replans"][0]["tr"]
        assert r["guidance"] == "tr_adaptive"
    assert ep["replans"][0]["s"] == 0.0 and ep["replans"][0]["branches_computed"] == ["cond"]
    png = out / ep["tr_trace"]
    assert png.is_file() and png.stat().st_size > 10_000
    info = read_info(out / "recording.mcap")
    counts = info.counts
    assert counts["/camera/stacked/image_raw"] == 20
    assert counts["/joint_states"] == 20 and counts["/vam/joint_targets"] == 20
    assert counts["/vam/telemetry"] == 2 and counts["/vam/tr"] == 2
    assert counts["/libero/episode_status"] == 1
    images = [m for m in read_messages(out / "recording.mcap", ["/camera/stacked/image_raw"])]
    assert images[0][-1].height == 64 and images[0][-1].width == 128     # what the policy saw (fitted views)
    assert summary["mock"]["image_size"] == 224 and summary["success_ci95"]["goal"][1] > 0


@pytest.mark.sim
def test_sim_expert_succeeds(tmp_path):
    out = tmp_path / "expert"
    assert main(["sim", "--suite", "spatial", "--episodes", "2", "--policy", "expert", "--no-record",
                 "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success_rate"] == {"spatial": 1.0}
    assert all(e["replans"] == [] for e in summary["episodes"])
    assert summary["stats"]["reach"] == {"episodes": 2, "object_episodes": 2, "grasped_named": 2,
                                         "grasped_other": 0, "closest_xy_cm_median": 0.0}


@pytest.mark.sim
def test_eval_expert_table(tmp_path, capsys):
    out = tmp_path / "eval"
    assert main(["eval", "--suites", "goal,goal_ood", "--policy", "expert", "--seeds", "0",
                 "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["success_rate"]) == {"goal", "goal_ood"}
    assert len(res["episodes"]) == 20
    md = (out / "results.md").read_text()
    assert "| goal |" in md and "expert OOD" in md
    k, n = res["by_guidance"]["expert"]["counts"]["goal"]
    assert n == 10 and f"({k}/10)" in md
    assert res["by_guidance"]["expert"]["reach"]["goal_ood"]["grasped_named"] == 10
    assert "| goal_ood | 10/10 named, 0 other, 0.0 cm |" in md
    # goal: the drawer, the stove and the pushed plate place nothing; the seven others are grasped
    assert res["by_guidance"]["expert"]["reach"]["goal"]["object_episodes"] == 7
    assert "| goal | 7/7 named, 0 other," in md
    assert "| goal_ood | 3 | put the cream cheese in the basket | 1/1 |" in md        # success per task too
    assert "Successes per task" in capsys.readouterr().out


@pytest.mark.sim
def test_eval_records_the_weights_and_runs_the_labelled_tr0_ablation(tmp_path):
    from vam_model.networks.checkpoint import verify_checkpoint
    from vam_stack.paths import models_dir

    out = tmp_path / "eval"
    assert main(["eval", "--suites", "goal", "--guidance", "tr_adaptive,tr_adaptive+running_min", "--seeds", "0",
                 "--max-steps", "20", "--device", "cpu", "--backend", "torch", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert (res["device"], res["backend"]) == ("cpu", "torch")
    shipped = models_dir() / "libero64.safetensors"
    assert res["weights"] == {"checkpoint": str(shipped), "tensor_sha256": verify_checkpoint(shipped)}
    assert res["guidance"] == ["tr_adaptive", "tr_adaptive+running_min"]
    assert {e["guidance"] for e in res["episodes"]} == {"tr_adaptive", "tr_adaptive+running_min"}
    assert (out / "tr_adaptive+running_min" / "goal_s0").is_dir()
    for bad, match in ((["--backend", "tflite"], "backend must be one of .*got 'tflite'"),
                       (["--policy", "expert", "--device", "cpu"], "the 'expert' policy has none")):
        with pytest.raises(ConfigError, match=match):           # checked before anything is written
            main(["eval", "--suites", "goal", *bad, "--out", str(tmp_path / "dev")])
        assert not (tmp_path / "dev").exists()
    with pytest.raises(SystemExit, match="unknown guidance 'flat\\+running_min'"):
        main(["eval", "--suites", "goal", "--guidance", "flat+running_min", "--out", str(tmp_path / "bad")])


@pytest.mark.unit
def test_guidance_weights_reach_the_policy_and_bad_ones_are_named(tmp_path):
    from vam_sim.libero_mock.runner import SimRunner
    from vam_stack.config import ConfigError

    cfg = SimConfig(preset="tiny", guidance="flat").with_weights(w_lang=0.25, w_plan=0.5, s_max=1.5)
    g = SimRunner(cfg, tmp_path / "run")._policy_for_run().cfg.guidance
    assert (g.schedule, g.w_lang_base, g.w_plan_base, g.s_max) == ("flat", 0.25, 0.5, 1.5)
    assert SimRunner(SimConfig(preset="tiny"), tmp_path / "r2")._policy_for_run().cfg.guidance.w_plan_base == 0.3
    with pytest.raises(ConfigError, match=r"w_plan_base must be finite and >= 0, got -1.0"):
        SimConfig().with_weights(w_plan=-1.0)
    with pytest.raises(ConfigError, match="the 'expert' policy has none"):
        SimConfig(policy="expert").with_weights(s_max=1.0)
    with pytest.raises(ConfigError, match="w_lang_base must be finite"):
        main(["eval", "--suites", "goal", "--w-lang", "nan", "--out", str(tmp_path / "e")])
    assert not (tmp_path / "e").exists()


@pytest.mark.unit
def test_a_wall_clock_realtime_run_warms_its_policy_before_the_first_episode(tmp_path, caplog, monkeypatch):
    import vam_sim.episode as episode
    from vam_sim.libero_mock.runner import SimRunner

    calls = []
    real = episode.warm_up                                          # vam_control.runtime's, imported there
    monkeypatch.setattr(episode, "warm_up", lambda *a, **k: calls.append(a) or real(*a, **k))
    for executor, virtual, warmed in (("lockstep", 0.0, False), ("realtime", 100.0, False), ("realtime", 0.0, True)):
        calls.clear()
        cfg = SimConfig(preset="tiny", executor=executor, virtual_latency_ms=virtual, seed=3)
        with caplog.at_level("INFO", logger="vam_sim.episode"):
            policy = SimRunner(cfg, tmp_path / f"{executor}{virtual:g}")._policy_for_run()
        assert bool(calls) == warmed, (executor, virtual)
    assert calls[0][0] is policy and calls[0][2] == 3             # reseeded at the run's seed afterwards
    assert "policy warmed up: reset" in caplog.text and "first_replan" in caplog.text
