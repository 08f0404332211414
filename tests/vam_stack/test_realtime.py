"""vam_stack.realtime: SCHED_FIFO for a control process's threads, normal scheduling and a nice value
for its heavy child. Each scheduling change runs in a child process (the test process keeps its own)."""
import os
import subprocess
import sys
import textwrap

import pytest

from vam_stack import realtime


def _fifo_allowed() -> bool:
    out = subprocess.run([sys.executable, "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, "
                          "os.sched_param(1))"], capture_output=True)
    return out.returncode == 0


needs_rt = pytest.mark.skipif(not hasattr(os, "sched_setscheduler") or not _fifo_allowed(),
                              reason="SCHED_FIFO is refused here (needs CAP_SYS_NICE or an rtprio limit)")


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("bad", [0, 100, -1])
def test_priorities_outside_1_99_are_refused_quoting_them(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        realtime.set_fifo_priority(bad)
    with pytest.raises(ValueError, match=repr(bad)):
        realtime.process_fifo(bad)


@pytest.mark.parametrize("bad", [-1, 20])
def test_a_nice_value_outside_0_19_is_refused(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        realtime.background(bad)


@needs_rt
def test_every_normal_thread_of_the_process_goes_fifo_and_a_realtime_one_keeps_its_priority():
    out = _run("""
        import os, threading, time
        from vam_stack import realtime
        ready, done = threading.Event(), threading.Event()
        tids = {}
        def work(name, prio):
            tids[name] = threading.get_native_id()
            if prio:
                realtime.set_fifo_priority(prio)
            ready.set() if len(tids) == 2 else None
            done.wait()
        a = threading.Thread(target=work, args=("plain", 0)); b = threading.Thread(target=work, args=("tick", 50))
        a.start(); b.start(); ready.wait(5); time.sleep(0.1)
        raised = realtime.process_fifo(40)
        later = []
        t = threading.Thread(target=lambda: later.append(os.sched_getparam(0).sched_priority)); t.start(); t.join()
        prio = {k: (os.sched_getscheduler(v) == os.SCHED_FIFO, os.sched_getparam(v).sched_priority) for k, v in tids.items()}
        main = os.sched_getparam(0).sched_priority
        done.set(); a.join(); b.join()
        print(raised, prio["plain"], prio["tick"], main, later[0])
    """)
    raised, *rest = out.split(" ", 1)
    assert int(raised) == 2, out                   # the main thread and the plain one (the tick was FIFO already)
    assert rest[0] == "(True, 40) (True, 50) 40 40", out   # plain raised, tick kept 50, main 40, a new thread inherits


@needs_rt
def test_a_child_started_from_a_fifo_thread_goes_back_to_normal_scheduling_at_its_nice():
    out = _run("""
        import os, subprocess, sys
        from vam_stack import realtime
        realtime.set_fifo_priority(30)
        child = ("import os; from vam_stack import realtime; before = os.sched_getscheduler(0) == os.SCHED_FIFO; "
                 "realtime.background(10); print(before, os.sched_getscheduler(0) == os.SCHED_OTHER, os.getpriority(os.PRIO_PROCESS, 0))")
        print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout.strip())
    """)
    assert out == "True True 10", out


@needs_rt
def test_spin_nodes_raises_the_process_to_the_highest_process_rt_priority_its_nodes_declare():
    pytest.importorskip("rclpy", reason="real rclpy (the project's ros extra) is not installed")
    out = _run("""
        import os, signal, sys
        import rclpy.node
        from vam_stack import ros

        def build(nodes):
            for name, prio in (("rt_a", 20), ("rt_b", 35), ("plain", None)):
                node = rclpy.node.Node(name)
                if prio is not None:
                    node.declare_parameter(ros.PROCESS_RT_PRIORITY.name, prio)
                nodes.append(node)
            def check():
                print(os.sched_getscheduler(0) == os.SCHED_FIFO, os.sched_getparam(0).sched_priority,
                      sys.getswitchinterval(), flush=True)
                os.kill(os.getpid(), signal.SIGINT)
            nodes[0].create_timer(0.05, check)
        ros.spin_nodes(build)
    """)
    assert out.splitlines()[0] == "True 35 0.0005", out      # and the GIL handed over within 0.5 ms
