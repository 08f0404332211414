"""The policy node's start-up stops on a signal: its autostart (load and warm-up, 108 s for yam64
in torch on a loaded CPU) went on past launch's SIGTERM (5 s) and SIGKILL (10 s)."""
from __future__ import annotations

import contextlib
import signal
import threading

# set by a SIGINT/SIGTERM during the start-up: what the signal interrupted (an import, an export, a
# load) may end in another error, which is then reported as the stop it was
stop_requested = threading.Event()


@contextlib.contextmanager
def interruptible():
    """SIGINT/SIGTERM raise KeyboardInterrupt while the block runs (the main thread only; the
    handlers before it are kept, called first, and restored). `ros.spin_nodes` only notes the
    signal until the nodes are built; the KeyboardInterrupt ends the constructor (its child process
    is ended with it) and spin_nodes exits 0, an operator's stop."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def interrupt(signum, frame):
        stop_requested.set()
        handler = previous.get(signum)
        if callable(handler):
            handler(signum, frame)       # spin_nodes' own: it notes the stop too
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_autostart(node, failed) -> None:
    """`node.autostart(failed)` (configure + activate), stoppable by SIGINT/SIGTERM; on any failure the
    node is destroyed (safe state) and the exception raised."""
    try:
        with interruptible():       # a Ctrl-C during the load and warm-up (seconds to minutes) stops it
            node.autostart(failed)
    except BaseException:
        node.destroy_node()
        raise


def say_configure_failed(log, error: BaseException) -> None:
    """Log why configure failed: an info line when the operator's stop interrupted it, else an error."""
    what = f"{type(error).__name__}: {error}"
    if stop_requested.is_set():
        log.info(f"configure interrupted by the operator's stop ({what})")
    else:
        log.error(f"configure failed: {what}")
