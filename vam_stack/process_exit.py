"""How a node process ends once its nodes have stopped (`vam_stack.ros.spin_nodes(exit_process=True)`):
no interpreter finalisation, which took the policy process ~2 CPU-seconds (8-15 s of wall time on a
loaded 2-core machine: past launch's SIGTERM at 5 s) and once aborted it in a C++ destructor. Plain
Python, no rclpy."""
from __future__ import annotations

import logging
import os
import sys


def process_name(nodes: list) -> str:
    """The first node's name, else the executable's: how a node process names itself in a last line."""
    return nodes[0].get_name() if nodes and hasattr(nodes[0], "get_name") else os.path.basename(sys.argv[0] or "node")


def exit_now(code: int = 0) -> None:
    """End this node process now: Python's logging and stdio flushed, then `os._exit`. Only after the
    nodes' own stop has run (destroyed, rclpy shut down and its log files closed)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def quiet_stop_while_importing(executable: str) -> None:
    """First thing a node module does when it is a process's entry point (its console script
    `executable` is running): a SIGINT/SIGTERM before `spin_nodes` takes them over (seconds of imports
    on a loaded machine) ends the process with 0 and one line, not a KeyboardInterrupt traceback and
    exit -2: nothing has started that a stop must undo. A module imported by anything else (a test,
    another program) changes no signal handler."""
    import signal
    import threading

    if os.path.basename(sys.argv[0] or "") != executable or threading.current_thread() is not threading.main_thread():
        return

    def stop(signum, frame):
        print(f"{executable}: stopped during start-up by {signal.Signals(signum).name} (while importing): "
              f"exiting cleanly", file=sys.stderr, flush=True)
        exit_now(0)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
