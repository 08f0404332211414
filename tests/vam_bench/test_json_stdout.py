"""`--json -` prints the JSON alone on stdout; progress and tables go to stderr (issue 61 row 2).

Before, every bench printed its table on stdout and the JSON after it, so `| jq` or
`| python -m json.tool` failed. Each bench runs through `vam_cli.main` at its cheapest settings;
the ones that take minutes (policy replans, backends, eval arms, the ROS graph, the foundation
import) have their measuring function replaced by a canned result, their printing kept.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import vam_sim.yam_mujoco  # noqa: F401  (sets MUJOCO_GL=egl before mujoco is first imported)
from vam_cli import main as cli

pytestmark = pytest.mark.unit


def _policy(mp):
    import vam_bench.policy as m
    mp.setattr(m, "bench_head", lambda preset, repeats, steps=10: {"head_ms": {"cached": 1.0, "uncached": 5.0},
                                                                   "cache_speedup": 5.0})
    return ["--preset", "real", "--device", "cpu", "--repeats", "1"]    # 2 B on a CPU: replan skipped, printed


def _backends(mp):
    import vam_bench.backends as m
    mp.setattr(m, "bench_backends", lambda *a, **k: {
        "preset": "tiny", "device": "cpu", "input_shape": [1, 3], "flops": {"velocity": 1e9, "features": 2e9},
        "backends": {"torch": {"unavailable": "canned"}}, "parity_ok": True})
    return ["--backend", "torch", "--repeats", "1"]


def _eval(mp):
    import vam_bench.eval as m
    from vam_sim.episode import EpisodeRunner  # noqa: F401  (SimRunner's base: policy_for_run)
    from vam_sim.libero_mock.runner import SimRunner
    mp.setattr(SimRunner, "policy_for_run", staticmethod(lambda *a, **k: None))
    mp.setattr(m, "_arm", lambda backend, w, threads, args, out: {
        "backend": backend, "workers": w, "threads": threads, "episodes": 1, "successes": 1, "steps": 3,
        "wall_s": 1.0, "episodes_per_min": 60.0})
    return ["--episodes", "1", "--workers", "2"]


def _ros(mp):
    import vam_bench.ros_graph as m
    mp.setattr(m, "measure", lambda args: {
        "preset": "tiny_real", "window_s": 1.0, "replans": {"n": 3, "latency_ms_p50": 200.0},
        "exit_codes": {"yam_driver": 0},
        "camera_to_policy": {"latency_ms_p50": 1.0, "latency_ms_p99": 2.0, "received": 30, "published": 30,
                             "drop_rate": 0.0},
        "policy_to_driver": {"rate_hz": 30.0, "period_ms_p50": 33.3, "jitter_ms_p99": 1.0, "missed_ticks": 0,
                             "latency_ms_p50": 1.0, "latency_ms_p99": 2.0},
        "estop_to_driver_hold": {"ms_p50": 1.0, "ms_max": 2.0, "n": 2}, "cpu_percent": {"self": 10.0},
        "graph": "robot", "transport": "raw", "host_freezes": {"n": 0, "ms": []},
        "stages": {"paired": 3, "bare": {"p50_ms": 1.0, "p99_ms": 2.0, "n": 30},
                   "frames": {"capture -> received (camera -> policy)": {"p50_ms": 2.0, "p99_ms": 3.0}},
                   "targets": {"tick deadline -> tick thread woke": {"p50_ms": 0.0, "p99_ms": 0.1}}}})
    return []


def _foundation(mp):
    import vam_bench.foundation as m
    mp.setattr(m, "bench", lambda preset, folder: {
        "preset": preset, "import_s": 1.0, "peak_rss_gb": 0.1, "dit_file_gb": 0.01, "vae_folder_gb": 0.01,
        "checkpoint_gb": 0.01, "checkpoint_bytes": 10, "write_inputs_s": 0.1, "import_stdout": "wrote x"})
    return []


ALL_BUT_MODEL_INFO = [a for s in ("replan", "head", "backends", "camera", "executor", "driver", "libero")
                      for a in ("--skip", s)]
BENCHES = {
    "driver": lambda mp: ["--ticks", "10", "--seconds", "0.2"],
    "camera": lambda mp: ["--ticks", "20"],
    "libero": lambda mp: ["--task", "6", "--episodes", "1"],
    "executor": lambda mp: ["--seconds", "1", "--fake-policy-ms", "5", "--worker", "thread", "--rt-priority", "0"],
    "yam-mujoco": lambda mp: ["--ticks", "2"],
    "policy": _policy,
    "backends": _backends,
    "eval": _eval,
    "ros": _ros,
    "foundation": _foundation,
    "all": lambda mp: ["--quick", *ALL_BUT_MODEL_INFO],
}


def test_every_bench_with_json_is_covered():
    assert set(BENCHES) == set(cli.BENCHES)


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_json_dash_prints_only_the_json_on_stdout(name, monkeypatch, capsys):
    if name == "yam-mujoco":
        pytest.importorskip("mujoco")
    argv = BENCHES[name](monkeypatch)
    assert cli.main(["bench", name, *argv, "--json", "-"]) in (0, 1)
    out, err = capsys.readouterr()
    assert isinstance(json.loads(out), dict), out[:300]       # the whole of stdout is one JSON document
    assert err.strip(), "the table went nowhere"               # the table and progress: on stderr
    # issue 70 row 15: no benchmark recorded the load it ran under, nor the host's freezes
    machine = json.loads(out)["machine"]
    assert machine["cpus"] >= 1 and set(machine["load_1min"]) == {"start", "end", "max"}, machine
    assert machine["host_freezes"] is not None and machine["host_freezes"]["n"] == len(machine["host_freezes"]["ms"])
    assert "machine: " in err and "(in the JSON as `machine`)" in err


def test_json_dash_through_a_pipe_parses_and_a_path_prints_where_it_wrote(tmp_path):
    r = subprocess.run(f"{sys.executable} -m vam_cli.main bench driver --ticks 10 --seconds 0.2 --json - "
                       f"| {sys.executable} -m json.tool", shell=True, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "results" in json.loads(r.stdout) and "bus" in r.stderr
    out = tmp_path / "d.json"
    r = subprocess.run([sys.executable, "-m", "vam_cli.main", "bench", "driver", "--ticks", "10", "--seconds", "0.2",
                        "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "bus" in r.stdout and f"wrote {out}" in r.stdout     # no --json -: stdout as before
    assert "results" in json.loads(out.read_text())


def test_a_child_process_writing_to_stdout_goes_to_stderr_while_the_json_owns_it():
    code = textwrap.dedent("""
        import subprocess, sys
        from vam_stack.outputs import json_owns_stdout, write_json_output
        print("before")
        with json_owns_stdout():
            print("table")
            subprocess.run([sys.executable, "-c", "print('child')"], check=True)
            write_json_output("-", {"a": 1})
        print("after")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["before", "{", '"a":', "1", "}", "after"]
    assert r.stderr.split() == ["table", "child"]


@pytest.mark.parametrize("failure", [TimeoutError("first replans not within 180 s (logs in /tmp/x)"),
                                     KeyError("frames_latency_ms_p50"),
                                     RuntimeError("first replans: a process exited: {'vam_policy_node': 1}")])
def test_bench_ros_that_gets_no_result_says_so_in_one_line_and_in_its_json(failure, monkeypatch, capsys):
    # issue 70 row 8: `bench ros --json -` on a loaded machine printed a Python traceback and nothing on stdout
    import vam_bench.ros_graph as m

    def measure(args):
        raise failure
    monkeypatch.setattr(m, "measure", measure)
    assert cli.entry(["bench", "ros", "--json", "-"]) == 1
    out, err = capsys.readouterr()
    r = json.loads(out)
    assert r["complete"] is False and r["error"].startswith(type(failure).__name__ + ": ") and "machine" in r
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err and [x for x in lines if "error" in x] == [
        f"vam-stack bench ros: error: the graph gave no result: {r['error']}"], err
