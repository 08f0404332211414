"""Fault campaign, issue #19 rows 4 (evaluation that cannot lie by omission) and 5 (data loss).

One test per row; each failed on the code before the fix. Policies are fakes wherever the real
model is not the point, episodes are a few steps, and recordings are off where irrelevant.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vam_sim.libero_mock.runner import SimConfig, SimRunner
from vam_cli.main import entry, main
from vam_stack.config import ConfigError

REPO = Path(__file__).resolve().parents[2]


class FakePolicy:
    """What SimRunner needs of a policy: LIBERO-shaped spec, reset(), reseed(), infer(). `refuse` makes
    every infer raise the ValueError a policy raises on a frame it cannot take."""

    checkpoint = None

    def __init__(self, refuse: bool = False, action_type: str = "eef_delta"):
        self.spec = SimpleNamespace(chunk=17, execute=10, action_dim=7, rate_hz=20.0, proprio_dim=8,
                                    height=64, width=128, views=2, action_type=action_type)
        self.mcfg = SimpleNamespace(name="fake", robot=SimpleNamespace(
            cameras=["agentview", "wrist"], camera_width=64, camera_height=64, frame_skip=1))
        self.refuse = refuse

    def reset(self, instruction: str) -> None:
        self.instruction = instruction

    def reseed(self, seed: int) -> None:      # each episode reseeds its policy (nothing random here)
        self.seed = seed

    def infer(self, obs: dict) -> dict:
        if self.refuse:
            raise ValueError(f"frame {tuple(obs['frame'].shape)} does not match this preset's 96x192")
        a = np.zeros((17, 7))
        a[:, 6] = -1.0
        return {"actions": a, "tr": 0.5, "tr0": 0.5, "s": 0.0, "w_lang": 0.0, "w_plan": 0.0,
                "latency_ms": 1.0, "branches_computed": ["cond"]}


@pytest.fixture
def fake_policy(monkeypatch):
    """`vam-stack sim/eval` build this instead of the real model; returns a setter."""
    made = {"policy": FakePolicy()}
    monkeypatch.setattr(SimRunner, "_policy_for_run", lambda self: made["policy"])
    return lambda p: made.__setitem__("policy", p)


def _sim(out, *extra) -> list[str]:
    return ["sim", "--executor", "lockstep", "--suite", "goal", "--episodes", "1", "--max-steps", "3", "--out", str(out),
            *extra]


# ---- row 4: evaluation cannot lie by omission ------------------------------------------------

@pytest.mark.sim
@pytest.mark.parametrize("executor", ["lockstep", "realtime"])
def test_episode_without_a_successful_replan_is_an_error_with_its_counts(tmp_path, executor):
    # before: termination "timeout", no count of refused inputs, no error message
    cfg = SimConfig(episodes=1, max_steps=6, executor=executor, record=False, plots=False)
    with SimRunner(cfg, tmp_path, policy=FakePolicy(refuse=True)) as runner:
        ep = runner.run_episode(0)
    assert ep["termination"] == "error" and ep["steps"] == 6 and ep["replans"] == []
    assert ep["inference_errors"] >= 1 and ep["refused_inputs"] == ep["inference_errors"]
    assert "ValueError: frame" in ep["first_error"] and "does not match" in ep["first_error"]


@pytest.mark.sim
def test_eval_and_sim_count_failed_replans_per_cell_and_exit_nonzero(tmp_path, fake_policy, capsys):
    # before: eval printed 0 % success and exit 0; results said nothing about 30 failed replans
    fake_policy(FakePolicy(refuse=True))
    out = tmp_path / "eval"
    rc = main(["eval", "--suites", "goal", "--episodes-per-task", "1", "--seeds", "0", "--guidance", "none",
               "--max-steps", "3", "--workers", "1", "--backend", "torch", "--out", str(out)])   # the fake lives here
    err = capsys.readouterr().err
    assert rc == 1 and "no replan succeeded" in err and "ValueError: frame" in err
    res = json.loads((out / "results.json").read_text())
    cell = res["by_guidance"]["none"]["errors"]["goal"]
    assert cell == {"episodes": 10, "replans_ok": 0, "inference_errors": 30, "refused_inputs": 30,
                    "error_episodes": 10, "first_error": cell["first_error"]}
    assert res["complete"] is True and {e["termination"] for e in res["episodes"]} == {"error"}
    assert all(e["refused_inputs"] == 3 for e in res["episodes"])
    md = (out / "results.md").read_text()
    assert "0.0 % (0/10) [0-28], 10 error episodes" in md and "| goal | 30 failed (30 refused), 10/10 error episodes |" in md
    # sim: the same failure is one non-zero exit with the first error; the healthy policy exits 0
    rc = main(_sim(tmp_path / "sim", "--no-record"))
    captured = capsys.readouterr()
    assert rc == 1 and "vam-stack sim: error: no replan succeeded" in captured.err
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert summary["stats"]["errors"]["refused_inputs"] == 3 and summary["episodes"][0]["termination"] == "error"
    fake_policy(FakePolicy())
    assert main(_sim(tmp_path / "ok", "--no-record")) == 0


# ---- row 5: data loss -------------------------------------------------------------------------

@pytest.mark.sim
def test_non_empty_out_is_refused_unless_overwrite(tmp_path, fake_policy):
    # before: a rerun silently replaced recording.mcap and summary.json; collect removed a dataset
    out = tmp_path / "run"
    out.mkdir()
    (out / "recording.mcap").write_bytes(b"an earlier run")
    for argv in (_sim(out, "--no-record"),
                 ["eval", "--suites", "goal", "--guidance", "none", "--max-steps", "2", "--out", str(out)]):
        with pytest.raises(FileExistsError, match=r"is not empty \(recording.mcap\).*--overwrite"):
            main(argv)
    assert sorted(p.name for p in out.iterdir()) == ["recording.mcap"]
    assert (out / "recording.mcap").read_bytes() == b"an earlier run"
    assert main(_sim(out, "--no-record", "--overwrite")) == 0
    assert (out / "summary.json").is_file()
    with pytest.raises(NotADirectoryError, match="is a file"):
        main(_sim(out / "summary.json"))

    from vam_sim.collect import CollectConfig, collect

    data = tmp_path / "demos"
    (data / "meta").mkdir(parents=True)
    (data / "meta" / "info.json").write_text("{}")
    with pytest.raises(FileExistsError, match="already holds a dataset; pass --overwrite"):
        collect(CollectConfig(episodes_per_task=1), data)
    assert (data / "meta" / "info.json").read_text() == "{}"


@pytest.mark.sim
def test_checks_that_can_fail_run_before_the_recorder_opens(tmp_path, fake_policy):
    # before: a failing rerun (--execute 100, a preset that does not fit) had already replaced
    # the earlier recording with an empty one when the check fired
    out = tmp_path / "run"
    assert main(_sim(out, "--policy", "expert")) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert before["recording.mcap"] and "summary.json" in before
    with pytest.raises(ConfigError, match=r"execute must be in \[1, chunk=17\], got 100"):
        main(_sim(out, "--execute", "100", "--overwrite"))
    fake_policy(FakePolicy(action_type="absolute_joint"))
    with pytest.raises(ValueError, match="needs a 7-dim eef_delta policy"):
        main(_sim(out, "--overwrite"))
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not (tmp_path / "fresh").exists()
    with pytest.raises(ValueError, match="needs a 7-dim eef_delta policy"):
        main(_sim(tmp_path / "fresh"))
    assert not (tmp_path / "fresh").exists()                  # nothing created for a refused run


CHILD = textwrap.dedent("""
    import sys, time
    from vam_stack.recording import McapRecorder
    rec = McapRecorder(sys.argv[1], origin_s=0.0).open()
    for i in range(5):
        rec.write_float32("tr", float(i), 0.1 * i)
    getattr(rec, "flush", lambda: None)()         # chunk 1 on disk (the recorder before #19 had no flush)
    for i in range(5, 8):                         # still in the pending chunk when killed
        rec.write_float32("tr", float(i), 0.1 * i)
    print("ready", flush=True)
    time.sleep(120)
""")


@pytest.mark.unit
def test_sigkill_leaves_a_recording_readable_up_to_the_last_chunk(tmp_path):
    # before: the MCAP was written in a hidden staging folder and moved at close: no recording.mcap
    mcap_stream = pytest.importorskip("mcap.stream_reader")
    from mcap.exceptions import EndOfFile
    from mcap.records import Channel, Message, Schema
    from mcap_ros2.decoder import DecoderFactory

    path = tmp_path / "recording.mcap"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True,
                             cwd=REPO)
    try:
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.kill()
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    assert [p.name for p in tmp_path.iterdir()] == ["recording.mcap"]          # in place, nothing staged
    schemas, channels, values = {}, {}, []
    decoders = DecoderFactory()
    with path.open("rb") as f:
        with pytest.raises(EndOfFile):                                          # no footer: killed
            for rec in mcap_stream.StreamReader(f).records:
                if isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Message):
                    ch = channels[rec.channel_id]
                    decode = decoders.decoder_for(ch.message_encoding, schemas[ch.schema_id])
                    values.append((ch.topic, rec.log_time, decode(rec.data).data))
    assert values == [("/vam/tr", int(i * 1e8), float(i)) for i in range(5)]


def _run_until_first_episode(out: Path) -> subprocess.Popen:
    """Start `vam-stack sim` (expert, recording on) and return once summary.json holds an episode."""
    argv = [sys.executable, "-m", "vam_cli.main", "sim", "--suite", "goal", "--policy", "expert",
            "--episodes", "200", "--max-steps", "30", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=os.environ | {"OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads((out / "summary.json").read_text())["episodes"]:
                return proc
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no finished episode in summary.json within 120 s (exit {proc.poll()}): "
                         f"{proc.stderr.read()[-2000:]}")


@pytest.mark.sim
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_close_the_recording_and_keep_the_finished_episodes(tmp_path, signum):
    # before: SIGTERM left no recording.mcap at all (only a footer-less file in a hidden folder);
    # SIGINT closed the MCAP but wrote no summary.json although episodes had finished
    from vam_stack.recording import read_info

    out = tmp_path / "run"
    proc = _run_until_first_episode(out)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and f"interrupted ({signal.Signals(signum).name})" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["interrupted"] == signal.Signals(signum).name
    n = len(summary["episodes"])
    assert 1 <= n < 200 and all(e["steps"] >= 1 for e in summary["episodes"])
    info = read_info(out / "recording.mcap")                  # footer written: index readers open it
    assert info.counts["/libero/episode_status"] >= n
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


# ---- row 5, last part: a user's mistake is one line -------------------------------------------

@pytest.mark.unit
def test_a_user_mistake_prints_one_line_and_exits_2(tmp_path, capsys, monkeypatch):
    # before: a 16-line traceback (the console script ran main(), which raises)
    monkeypatch.delenv("VAM_STACK_DEBUG", raising=False)
    argv = ["sim", "--episodes", "0", "--out", str(tmp_path / "x")]
    assert entry(argv) == 2
    err = capsys.readouterr().err
    assert err == "vam-stack sim: error: episodes must be >= 1, got 0\n"
    with pytest.raises(ConfigError, match="episodes must be >= 1"):
        main(argv)                                             # programmatic callers still get the error
    with pytest.raises(ConfigError):
        entry(argv + ["--debug"])
    monkeypatch.setenv("VAM_STACK_DEBUG", "1")
    with pytest.raises(ConfigError):
        entry(argv)
    monkeypatch.delenv("VAM_STACK_DEBUG")
    assert entry(["eval", "--guidance", "nosuch", "--out", str(tmp_path / "y")]) == 2
    assert capsys.readouterr().err.startswith("vam-stack eval: error: unknown guidance 'nosuch'")
    # the installed console script is the catching entry point
    script = Path(sys.executable).parent / "vam-stack"
    done = subprocess.run([str(script), *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == "vam-stack sim: error: episodes must be >= 1, got 0\n"
