"""`vam-stack ros-graph` / `ProcessGraph` stop a graph as `ros2 launch` (3.4.3, jazzy) is stopped
by a terminal's Ctrl-C: every process in one process group, SIGINT to the whole group (a node's
own children too, as the terminal sends it), SIGTERM to each process still running
`sigterm_timeout_s` later, SIGKILL `sigkill_timeout_s` after that; and `ros-graph` returns 0 once
the graph is down whatever a node's exit code, as launch does. Fake nodes (a small Python script
standing in for each console script): no ROS, a few seconds."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vam_stack import process_graph
from vam_stack.process_graph import ProcessGraph

pytestmark = pytest.mark.unit

# one script for every node; what it does depends on its node name (-r __node:=NAME) and FAKE_PLAN
FAKE_NODE = textwrap.dedent('''
    import os, signal, subprocess, sys, time
    name = next(a.split(":=")[1] for a in sys.argv if a.startswith("__node:="))
    out = os.environ["FAKE_DIR"]
    plan = dict(p.split("=") for p in os.environ["FAKE_PLAN"].split(","))[name]
    with open(os.path.join(out, name + ".pid"), "w") as f:
        f.write(f"{os.getpid()} {os.getpgid(0)}")
    if plan == "child":        # a node with a child process of its own (the policy node's worker)
        child = subprocess.Popen([sys.executable, "-c", (
            "import os, signal, time\\n"
            "def h(*_):\\n"
            "    open(os.path.join(%r, 'grandchild.sigint'), 'w').close(); os._exit(0)\\n"
            "signal.signal(signal.SIGINT, h)\\n"
            "open(os.path.join(%r, 'grandchild.ready'), 'w').close()\\n"
            "time.sleep(60)\\n") % (out, out)])
    if plan in ("child", "clean"):
        signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    elif plan == "deaf_int":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    elif plan == "deaf":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif plan == "default":    # Python's own KeyboardInterrupt (what a node without a handler of its own has)
        try:
            open(os.path.join(out, name + ".ready"), "w").close()
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            sys.exit(0)
    elif plan.startswith("exit"):
        sys.exit(int(plan[4:]))
    open(os.path.join(out, name + ".ready"), "w").close()
    while True:
        time.sleep(1)
''')


@pytest.fixture
def fake_nodes(tmp_path, monkeypatch):
    script = tmp_path / "fake_node.py"
    script.write_text(FAKE_NODE)
    wrapper = tmp_path / "fake_node"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(process_graph, "find_executable", lambda name: str(wrapper))
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    return tmp_path


def wait_for(paths, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end and not all(Path(p).exists() for p in paths):
        time.sleep(0.05)
    assert all(Path(p).exists() for p in paths), [str(p) for p in paths if not Path(p).exists()]


def test_one_process_group_sigint_to_all_then_sigterm_then_sigkill(fake_nodes, monkeypatch):
    """The sim graph's three processes: one exits at SIGINT (its child gets the SIGINT too, as a
    terminal's Ctrl-C reaches it under launch), one only at SIGTERM, one only at SIGKILL."""
    monkeypatch.setenv("FAKE_PLAN", "libero_bridge=child,vam_policy_node=deaf_int,tr_monitor_node=deaf")
    graph = ProcessGraph("sim", {}, log_dir=fake_nodes / "logs", sigterm_timeout_s=0.6, sigkill_timeout_s=0.6)
    with graph:
        names = ("libero_bridge", "vam_policy_node", "tr_monitor_node")
        wait_for([fake_nodes / f"{n}.ready" for n in names] + [fake_nodes / "grandchild.ready"])
        groups = {n: int((fake_nodes / f"{n}.pid").read_text().split()[1]) for n in names}
        assert len(set(groups.values())) == 1 and graph.pgid in groups.values(), groups
        assert graph.pgid != os.getpgid(0), "the graph must not share the caller's (the terminal's) group"
        codes = graph.stop()
    assert codes == {"libero_bridge": 0, "vam_policy_node": -signal.SIGTERM, "tr_monitor_node": -signal.SIGKILL}
    assert (fake_nodes / "grandchild.sigint").exists(), "SIGINT did not reach a node's own child"
    t = graph.stop_times
    assert t["libero_bridge"] < 0.5 and 0.55 < t["vam_policy_node"] < 1.1 and 1.15 < t["tr_monitor_node"] < 1.8, t


def test_ros_graph_returns_0_like_launch_after_ctrl_c_though_a_node_failed(fake_nodes):
    """A node that exits by itself (code 3) is reported and the others keep running until Ctrl-C;
    then ros-graph returns 0, as `ros2 launch` does (it printed the nodes' codes)."""
    env = dict(os.environ, FAKE_PLAN="libero_bridge=exit3,vam_policy_node=clean,tr_monitor_node=clean",
               PYTHONUNBUFFERED="1")
    code = textwrap.dedent(f'''
        import sys
        from vam_stack import process_graph
        process_graph.find_executable = lambda name: {str(fake_nodes / "fake_node")!r}
        p = __import__("argparse").ArgumentParser()
        process_graph.add_arguments(p)
        sys.exit(process_graph.run(p.parse_args(["sim", "--quiet", "--log-dir", {str(fake_nodes / "logs")!r}])))
    ''')
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "libero_bridge exited with code 3" in line:
                break
        wait_for([fake_nodes / f"{n}.ready" for n in ("vam_policy_node", "tr_monitor_node")])
        time.sleep(0.3)
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(lines) + out
    assert proc.returncode == 0, text
    assert "libero_bridge: exit code 3" in text and "vam_policy_node: exit code 0" in text, text


def test_sigint_stops_a_ros_graph_started_as_a_background_job_of_a_script(fake_nodes):
    """Issue 70 row 6: `vam-stack ros-graph ... &` from a script, then `pkill -INT` (docs/bring_up.md): a
    non-interactive shell starts a background job with SIGINT ignored, ros-graph relied on Python's
    KeyboardInterrupt (never installed then) and ignored it, and so would every node it started."""
    env = dict(os.environ, FAKE_PLAN="libero_bridge=default,vam_policy_node=default,tr_monitor_node=default",
               PYTHONUNBUFFERED="1")
    code = textwrap.dedent(f'''
        import sys
        from vam_stack import process_graph
        process_graph.find_executable = lambda name: {str(fake_nodes / "fake_node")!r}
        p = __import__("argparse").ArgumentParser()
        process_graph.add_arguments(p)
        sys.exit(process_graph.run(p.parse_args(["sim", "--quiet", "--log-dir", {str(fake_nodes / "logs")!r}])))
    ''')
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)       # noqa: E731 (as `cmd &` in a script)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True, preexec_fn=ignore, start_new_session=True)
    try:
        wait_for([fake_nodes / f"{n}.ready" for n in ("libero_bridge", "vam_policy_node", "tr_monitor_node")])
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)                                   # pkill -INT
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out
    for n in ("libero_bridge", "vam_policy_node", "tr_monitor_node"):    # each node left at the SIGINT itself
        line = next(x for x in out.splitlines() if x.startswith(f"[ros-graph] {n}: exit code"))
        assert line.startswith(f"[ros-graph] {n}: exit code 0 (") and float(line.split("(")[1].split()[0]) < 4.0, out
