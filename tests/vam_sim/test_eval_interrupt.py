"""Ctrl-C before the first `eval` episode finished leaves `--out` as a rerun accepts it (issue 61 row 4).

Before, the interrupted run printed "nothing written" but left `none/goal_s0/` (empty) under
`--out`, and the rerun was refused: "--out ... is not empty".
"""
from __future__ import annotations

import json

import pytest

from vam_cli.main import main
from vam_sim.libero_mock.runner import SimRunner

pytestmark = pytest.mark.unit

ARGV = ["eval", "--suites", "goal", "--policy", "expert", "--seeds", "0", "--episodes-per-task", "1",
        "--max-steps", "3"]


def _interrupt(*a, **k):
    raise KeyboardInterrupt


@pytest.mark.parametrize("existed", [False, True], ids=["new-out", "empty-out"])
def test_ctrl_c_before_the_first_episode_leaves_an_out_the_rerun_accepts(tmp_path, monkeypatch, capsys, existed):
    out = tmp_path / "eval"
    if existed:
        out.mkdir()
    with monkeypatch.context() as m:
        m.setattr(SimRunner, "run_episode", _interrupt)
        assert main(ARGV + ["--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "before the first episode finished" in err and "a rerun starts there" in err
    assert out.is_dir() == existed and (not existed or list(out.iterdir()) == [])
    assert main(ARGV + ["--out", str(out)]) == 0                      # the rerun, no --overwrite
    assert len(json.loads((out / "results.json").read_text())["episodes"]) == 10


def test_ctrl_c_before_the_first_episode_keeps_files_already_there(tmp_path, monkeypatch, capsys):
    out = tmp_path / "eval"
    (out / "none" / "goal_s0").mkdir(parents=True)
    (out / "notes.txt").write_text("mine\n")
    with monkeypatch.context() as m:
        m.setattr(SimRunner, "run_episode", _interrupt)
        assert main(ARGV + ["--out", str(out), "--overwrite"]) == 130
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine\n" and sorted(p.name for p in out.iterdir()) == ["notes.txt"]
