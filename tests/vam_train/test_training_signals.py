"""`vam-stack train` stopped from outside (issue 70 rows 4 and 5), as a user stops it: the command as
a process, SIGTERM (`kill PID`) or SIGINT (Ctrl-C) to it.

Before: SIGTERM ended the parent of a two-rank run and left both ranks training as orphans; Ctrl-C
before the first checkpoint kept nothing and said nothing, and the same command into the same
--out was accepted and appended its lines to the old log.jsonl."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.unit, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Two scripted-expert goal episodes at 64x64 views (the libero64 preset's size)."""
    from vam_sim.collect import bridge_info
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert
    from vam_data.dataset import write_dataset

    mock = LiberoMockConfig(image_size=64)
    root = tmp_path_factory.mktemp("sig") / "demos"
    write_dataset(root, [rollout_expert("goal", 1, 0, 9, cfg=mock), rollout_expert("goal", 6, 0, 9, cfg=mock)],
                  bridge_info(mock))
    return root


def _config(tmp_path: Path, dataset: Path, ranks: int) -> Path:
    cfg = tmp_path / f"train_{ranks}.yaml"
    cfg.write_text(f"train:\n  preset: libero64\n  dataset: {dataset}\n  steps: 5000\n  batch: 4\n  warmup: 1\n"
                   f"  ema: 0.5\n  threads: 1\n  ranks: {ranks}\n  checkpoint_every: 5000\n  log_every: 1\n")
    return cfg


def _as_background_job() -> None:
    """What `vam-stack train ... &` in a script gets: SIGINT ignored (a non-interactive shell's background
    job), inherited by every process it starts."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(cfg: Path, out: Path, background: bool = False) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "vam_cli.main", "train", "--config", str(cfg), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=_as_background_job if background else None)


def _wait_for_steps(proc: subprocess.Popen, log: Path, steps: int, timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.is_file() and len(log.read_text().splitlines()) >= steps:
            return
        if proc.poll() is not None:
            raise AssertionError(f"train exited {proc.returncode} early: {proc.communicate()}")
        time.sleep(0.2)
    raise AssertionError(f"{steps} steps not logged within {timeout:.0f} s")


def _descendants(pid: int) -> set[int]:
    from vam_stack.process_graph import child_pids

    found, stack = set(), [pid]
    while stack:
        for c in child_pids(stack.pop()):
            found.add(c)
            stack.append(c)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_stops_every_rank_and_keeps_the_checkpoint_of_the_step_it_stopped_at(tmp_path, dataset):
    out = tmp_path / "run"
    proc = _start(_config(tmp_path, dataset, ranks=2), out, background=True)   # started from a script with `&`
    ranks: set[int] = set()
    try:
        _wait_for_steps(proc, out / "log.jsonl", 2)
        ranks = _descendants(proc.pid)
        assert len(ranks) >= 2, ranks
        proc.send_signal(signal.SIGTERM)                  # `kill PID`
        proc.wait(timeout=120)
        end = time.monotonic() + 10
        while time.monotonic() < end and any(_alive(p) for p in ranks):
            time.sleep(0.1)
        orphans = [p for p in ranks if _alive(p)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for p in ranks:                                   # (the old behaviour's orphans)
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
    _, err = proc.communicate(timeout=30)
    assert not orphans, f"ranks still training after the parent exited: {orphans}"
    assert proc.returncode == 128 + signal.SIGTERM, err
    state = torch.load(out / "train_state.pt", weights_only=True)
    lines = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert lines[-1] == {"step": state["step"], "interrupted": "SIGTERM", "elapsed_s": lines[-1]["elapsed_s"]}
    assert state["step"] >= 2 and (out / "model.safetensors").is_file()
    assert f"interrupted (SIGTERM): stopped at step {state['step']}, kept {out / 'train_state.pt'}" in err, err


def test_ctrl_c_before_the_first_checkpoint_keeps_one_and_the_rerun_is_refused_without_resume(tmp_path, dataset):
    from vam_cli.main import entry

    cfg, out = _config(tmp_path, dataset, ranks=1), tmp_path / "run"
    proc = _start(cfg, out)
    try:
        _wait_for_steps(proc, out / "log.jsonl", 2)       # checkpoint_every 5000: none written yet
        assert not (out / "train_state.pt").exists()
        proc.send_signal(signal.SIGINT)                   # Ctrl-C
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGINT, err
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] >= 2
    assert f"stopped at step {state['step']}, kept {out / 'train_state.pt'}" in err and "--resume" in err, err
    before = (out / "log.jsonl").read_text()
    code = entry(["train", "--config", str(cfg), "--out", str(out)])      # the same command again
    assert code == 2 and (out / "log.jsonl").read_text() == before


def test_an_out_holding_only_a_log_is_refused_without_overwrite(tmp_path, capsys):
    # the rerun of issue 70 row 5: a run stopped before its checkpoint left log.jsonl, and the next run appended
    from vam_cli.main import entry

    out = tmp_path / "run"
    out.mkdir()
    (out / "log.jsonl").write_text('{"step": 5, "total": 1.0}\n' * 3)
    assert entry(["train", "--dataset", "no/such/dir", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds an earlier run's log.jsonl (3 lines) but no checkpoint" in err and "--overwrite" in err, err


def test_ctrl_c_before_training_starts_says_nothing_kept_and_leaves_no_run_behind(tmp_path, dataset):
    from vam_train.stopping import StopRequest
    from vam_train.stopping import interrupted_message

    assert interrupted_message({"interrupted": "SIGINT", "kept": None}, tmp_path).startswith(
        "interrupted (SIGINT) before the first step finished: nothing kept")
    stop = StopRequest(force_second=True)
    with stop.installed(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)               # not armed: the loading phase stops at once
        time.sleep(1)
    stop.armed = True
    with stop.installed():
        os.kill(os.getpid(), signal.SIGTERM)              # armed: a request, the step finishes
        time.sleep(0.2)
        assert stop.requested == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)           # a second one: at once
            time.sleep(1)
