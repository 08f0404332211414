"""`vam-stack ros-graph` refuses a missing checkpoint in one line before it starts anything, and
names the signal that stops it (issue 61 rows 6 and 17).

Before: the graph started, and ~12 s later the policy node's worker failed to load the file and
printed ~55 lines of doubled traceback; and Ctrl-C printed "[ros-graph] : SIGINT to every process".
"""
from __future__ import annotations

import subprocess

import pytest

from vam_cli.main import entry
from vam_stack import process_graph
from vam_stack.process_graph import ProcessGraph

pytestmark = pytest.mark.unit


def _no_process(*a, **k):
    raise AssertionError("a process was started")


@pytest.mark.parametrize("launch_args", [["robot", "sim:=mujoco", "preset:=yam64"], ["robot"], ["sim"]])
def test_a_missing_checkpoint_is_one_line_before_any_process_starts(tmp_path, monkeypatch, capsys, launch_args):
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    missing = tmp_path / "nope" / "model.safetensors"
    assert entry(["ros-graph", *launch_args, f"checkpoint:={missing}", "--log-dir", str(tmp_path / "logs")]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("vam-stack ros-graph: error: checkpoint:=") and str(missing) in err
    assert "Traceback" not in out + err and not (tmp_path / "logs").exists()
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        ProcessGraph(launch_args[0], {"checkpoint": str(missing)})


def test_an_existing_checkpoint_and_none_pass(tmp_path):
    from vam_stack.paths import models_dir

    ckpt = models_dir() / "yam64.safetensors"
    ProcessGraph("robot", {"sim": "mujoco", "preset": "yam64", "checkpoint": str(ckpt)})
    ProcessGraph("robot", {"sim": "mujoco", "preset": "yam64"})


@pytest.mark.parametrize("content", [b"x", b"\xff" * 64, b"{}"])
def test_an_unreadable_checkpoint_is_one_line_before_any_process_starts(tmp_path, monkeypatch, capsys, content):
    # issue 70 row 10: a present but unreadable checkpoint started the graph and printed ~60 lines, the same
    # traceback twice, when the policy node failed to load it
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(content)
    assert entry(["ros-graph", "robot", "sim:=mujoco", "preset:=yam64", f"checkpoint:={bad}", "--log-dir",
                  str(tmp_path / "logs")]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"vam-stack ros-graph: error: checkpoint:='{bad}' is not a "
                                                    f"readable checkpoint"), err
    assert "Traceback" not in out + err and not (tmp_path / "logs").exists()


def test_ctrl_c_is_named(monkeypatch, capsys):
    class Graph:
        processes, log_dir = ["p"], "/tmp/logs"
        stop_times, sigterm_timeout_s, sigkill_timeout_s = {"p": 0.4}, 5.0, 5.0

        def __init__(self, *a, **k):
            pass

        def start(self):
            return self

        def exited(self):
            raise KeyboardInterrupt            # what Ctrl-C raises: no message

        def stop(self):
            return {"p": 0}

    monkeypatch.setattr(process_graph, "ProcessGraph", Graph)
    monkeypatch.setattr(process_graph.signal, "signal", lambda *a: None)   # keep pytest's own handlers
    assert entry(["ros-graph", "robot"]) == 0
    out = capsys.readouterr().out
    assert "[ros-graph] Ctrl-C: SIGINT to the process group" in out and "[ros-graph] :" not in out
    assert "[ros-graph] p: exit code 0 (0.40 s after the SIGINT)" in out
