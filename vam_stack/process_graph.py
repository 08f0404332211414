"""A launch file's vam_stack processes started as launch would start them, without launch.

`ProcessGraph(launch, args)` takes the rows of `vam_stack.launch_args` (the table the launch
files read), writes each process's parameter overrides to a file as launch_ros does, and
starts every node from its installed console script as its own OS process with exactly the
launch files' ROS arguments. It stops them as `ros2 launch` is stopped by a terminal's Ctrl-C
(launch 3.4.3, jazzy): every process is in one process group (launch's), SIGINT goes to the whole
group (the terminal's Ctrl-C reaches the nodes' own children too, e.g. the policy node's worker),
SIGTERM to each process still running `sigterm_timeout_s` later and SIGKILL `sigkill_timeout_s`
after that (launch's defaults: 5 s each); it reports each exit code and how long each process took
to exit after the SIGINT (`stop_times`). Every process's output goes to
`<log_dir>/<label>.log` and, with `echo`, to this terminal with a `[label]` prefix.

Used by `vam-stack ros-graph` (the graph on a machine whose ROS 2 came from pip, where launch
does not exist) and by the process-level tests. It imports no rclpy: the processes do.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, TextIO

from vam_stack.launch_args import LAUNCH_FILES, Process, processes


def isolate_ros(domain_id: int | None = None) -> int:
    """Put this process (and the processes it starts) on a ROS 2 domain of its own (`domain_id`, or
    a random one in 1-100) with discovery limited to this machine; before rclpy.init. Tests and
    benchmarks start an emulated arm that publishes joint targets: it must never meet a real one."""
    domain = domain_id if domain_id is not None else random.SystemRandom().randint(1, 100)
    if not 0 <= domain <= 232:
        raise ValueError(f"ROS_DOMAIN_ID must be in [0, 232], got {domain!r}")
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    if os.environ.get("ROS_DISTRO", "jazzy") == "humble":
        os.environ["ROS_LOCALHOST_ONLY"] = "1"          # Humble's switch; Jazzy deprecates it
    else:
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return domain


def find_executable(name: str) -> str:
    """An installed console script: beside this Python (a venv), under a colcon install's
    lib/vam_stack (where `ros2 run` looks), or on PATH."""
    here = Path(sys.executable).parent / name
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        p = Path(prefix) / "lib" / "vam_stack" / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"console script {name!r} is not installed (pip install -e . or colcon build "
                            f"and source install/setup.bash)")


def _parent_death_signal():
    """A preexec function giving each child SIGINT when this process dies, however it dies (Linux
    prctl PR_SET_PDEATHSIG): a killed test run or terminal leaves no node holding a port or the
    arm. Resolved here, before any thread starts, so the child only calls into libc."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigint = 1, int(signal.SIGINT)
    return lambda: prctl(pr_set_pdeathsig, sigint)


_PREEXEC = _parent_death_signal()


def _sigint_default():
    """A preexec function putting SIGINT back to its default action in the child (libc signal(2), resolved
    here so the child only calls into libc): a graph started from a script's background job inherits
    SIGINT ignored, and Python (a node) then never installs its KeyboardInterrupt, so launch's and
    ros-graph's SIGINT to the group would be ignored by every node until SIGTERM."""
    if not hasattr(signal, "SIGINT") or sys.platform.startswith("win"):
        return None
    import ctypes

    try:
        libc_signal = ctypes.CDLL(None, use_errno=True).signal
    except (OSError, AttributeError):
        return None
    libc_signal.argtypes, libc_signal.restype = (ctypes.c_int, ctypes.c_void_p), ctypes.c_void_p
    sigint = int(signal.SIGINT)
    return lambda: libc_signal(sigint, None)          # None: SIG_DFL


_SIGINT_DEFAULT = _sigint_default()


def _into_group(pgid: int):
    """A preexec function: join process group `pgid` (0: a new group led by the child), SIGINT to its
    default action, then the parent-death signal."""
    def preexec() -> None:
        os.setpgid(0, pgid)
        if _SIGINT_DEFAULT is not None:
            _SIGINT_DEFAULT()
        if _PREEXEC is not None:
            _PREEXEC()
    return preexec


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its descendants (Linux /proc; None elsewhere or when
    the process is gone): the policy node's policy runs in a child process."""
    total, stack, hz = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    try:
        while stack:
            p = stack.pop()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / hz
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError, IndexError):
        return None if total == 0.0 else total
    return total


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (Linux /proc; [] elsewhere or when it is gone)."""
    try:
        return [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return []


def wait_until_busy(pid: int, timeout_s: float = 120.0, window_s: float = 0.1, share: float = 0.5,
                    alone_share: float = 0.5) -> bool:
    """Wait until an inference is in flight in process `pid` (the policy node): one of its children
    (the policy's worker, `policy_process: true`) uses more than `share` of a core over `window_s`,
    or, without children (the policy in the node's own process), the process itself more than
    `alone_share`. False after `timeout_s`. For stopping a graph mid-inference (the stop tests and
    `scripts/graph_stop_times.py`)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        kids = child_pids(pid)
        watched = {k: share for k in kids} if kids else {pid: alone_share}
        before = {k: cpu_seconds(k) for k in watched}
        time.sleep(window_s)
        for k, c0 in before.items():
            c1 = cpu_seconds(k)
            if c0 is not None and c1 is not None and (c1 - c0) / window_s > watched[k]:
                return True
    return False


def driver_refusals(diagnostics: list) -> dict[str, int]:
    """The driver's cumulative target refusals (refused_order, refused_stale, ...) in the newest
    /diagnostics that carries them; {} when none did."""
    from vam_stack.msgs import diagnostics_to_dict

    for d in reversed(diagnostics):
        for status in diagnostics_to_dict(d).values():
            values = status["values"]
            if "refused_order" in values:
                return {k: int(v) for k, v in values.items() if k.startswith("refused_") and k != "refused_messages"}
    return {}


@dataclass
class Running:
    """One started process."""

    label: str
    process: Process
    popen: subprocess.Popen
    log_path: Path
    reader: threading.Thread

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()


def _check_files(procs: list[Process]) -> None:
    """A `checkpoint:=` that names no file, or a file that is not a readable checkpoint of this
    project (its safetensors header and stored config, read without its tensors), is refused here, in
    one line, before anything starts (the policy node found it only after its worker process had
    started, ~12 s in, and printed its traceback twice)."""
    for proc in procs:
        ckpt = str((proc.overrides or {}).get("checkpoint") or "")
        if not ckpt:
            continue
        path = Path(ckpt) if Path(ckpt).is_file() else Path(ckpt).expanduser()
        who = proc.name or proc.executable
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint:={ckpt!r} is not a file ({who} would fail at configure); leave "
                                    f"it out for models/<preset>.safetensors")
        problem = checkpoint_problem(path)
        if problem:
            raise ValueError(f"checkpoint:={ckpt!r} is not a readable checkpoint ({who} would fail at "
                             f"configure): {problem}")


def checkpoint_problem(path: Path) -> str | None:
    """Why `path` is not a checkpoint the policy node can read, or None: a safetensors file (an 8-byte
    little-endian header length, then that much JSON) whose `__metadata__` carries the stored model
    `config` as JSON, as vam_model's save_checkpoint writes it. Read without torch or the tensors
    (the node checks the rest, the tensors' hash included, when it loads it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = os.fstat(f.fileno()).st_size
            if len(head) < 8:
                return f"{size} bytes: too short for a safetensors header"
            n = int.from_bytes(head, "little")
            if not 2 <= n <= size - 8:
                return f"not a safetensors file (header length {n} in a file of {size} bytes)"
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"not a safetensors file (its header is not JSON: {e})"
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or "config" not in meta:
        return "a safetensors file without this project's stored model config (__metadata__.config)"
    try:
        json.loads(meta["config"])
    except (TypeError, json.JSONDecodeError) as e:
        return f"its stored model config is not JSON ({e})"
    return None


class ProcessGraph:
    """See the module docstring. A context manager: leaving it stops every process."""

    def __init__(self, launch: str, args: Mapping[str, str] | None = None, log_dir: str | Path | None = None,
                 env: Mapping[str, str] | None = None, echo: TextIO | None = None,
                 sigterm_timeout_s: float = 5.0, sigkill_timeout_s: float = 5.0):
        self.launch = launch
        self.processes = processes(launch, args or {})        # checked before anything starts
        _check_files(self.processes)
        self.log_dir = Path(log_dir) if log_dir is not None else None   # None: a new temporary folder at start
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.echo = echo
        self.sigterm_timeout_s, self.sigkill_timeout_s = sigterm_timeout_s, sigkill_timeout_s
        self.running: list[Running] = []
        self.pgid: int | None = None                   # the graph's one process group (launch's)
        self.stop_times: dict[str, float] = {}         # label -> seconds from the stop's SIGINT to its exit
        self._echo_lock = threading.Lock()

    def start(self) -> "ProcessGraph":
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"vam_{self.launch}_"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for i, proc in enumerate(self.processes):
                label = proc.name or proc.executable
                overrides = None
                if proc.overrides:
                    overrides = self.log_dir / f"launch_params_{i}_{label}.yaml"
                    overrides.write_text(proc.overrides_yaml())
                argv = proc.argv(overrides)
                argv[0] = find_executable(argv[0])
                log_path = self.log_dir / f"{label}.log"
                # one process group for the graph, as under launch (not the terminal's: a terminal's
                # Ctrl-C reaches us and we send it on to the group, as the terminal does under launch)
                popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env,
                                         preexec_fn=_into_group(self.pgid or 0))
                if self.pgid is None:
                    self.pgid = popen.pid
                try:
                    os.setpgid(popen.pid, self.pgid)       # (also from here: no race with a signal before exec)
                except OSError:
                    pass
                reader = threading.Thread(target=self._pump, args=(label, popen, log_path), daemon=True,
                                          name=f"log-{label}")
                reader.start()
                self.running.append(Running(label, proc, popen, log_path, reader))
        except BaseException:
            self.stop()
            raise
        return self

    def _pump(self, label: str, popen: subprocess.Popen, log_path: Path) -> None:
        with open(log_path, "w", buffering=1) as log:
            for raw in iter(popen.stdout.readline, b""):
                line = raw.decode(errors="replace")
                log.write(line)
                if self.echo is not None:
                    with self._echo_lock:
                        self.echo.write(f"[{label}] {line}")
                        self.echo.flush()
        popen.stdout.close()

    def poll(self) -> dict[str, int | None]:
        """label -> exit code (None while running)."""
        return {r.label: r.returncode for r in self.running}

    def exited(self) -> dict[str, int]:
        return {k: v for k, v in self.poll().items() if v is not None}

    def log(self, label: str) -> str:
        for r in self.running:
            if r.label == label:
                return r.log_path.read_text(errors="replace") if r.log_path.exists() else ""
        raise KeyError(f"no process {label!r}; have {[r.label for r in self.running]}")

    def pid(self, label: str) -> int:
        return next(r.popen.pid for r in self.running if r.label == label)

    def cpu_seconds(self) -> dict[str, float | None]:
        """label -> CPU seconds used so far by the process and its children."""
        return {r.label: cpu_seconds(r.popen.pid) for r in self.running}

    def signal(self, sig: int, labels: list[str] | None = None) -> None:
        for r in self.running:
            if (labels is None or r.label in labels) and r.returncode is None:
                try:
                    r.popen.send_signal(sig)
                except ProcessLookupError:
                    pass

    def signal_group(self, sig: int) -> None:
        """`sig` to the graph's process group: every node and every process a node started."""
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self, labels: list[str] | None = None) -> dict[str, int]:
        """Stop as launch does after a terminal's Ctrl-C; label -> exit code. The whole graph
        (`labels` None): SIGINT to the process group; some processes: SIGINT to each (launch's
        SignalProcess). Then SIGTERM to each process still running after `sigterm_timeout_s`,
        SIGKILL after `sigkill_timeout_s` more. `stop_times` gets each process's time to exit."""
        chosen = [r for r in self.running if labels is None or r.label in labels]
        gone = {r.label for r in chosen if r.returncode is not None}    # exited before the stop: no stop time
        t0 = time.monotonic()
        for sig, wait_s in ((signal.SIGINT, self.sigterm_timeout_s), (signal.SIGTERM, self.sigkill_timeout_s),
                            (signal.SIGKILL, 5.0)):
            alive = [r for r in chosen if r.returncode is None]
            if not alive:
                break
            if sig == signal.SIGINT and labels is None:
                self.signal_group(sig)
            else:
                self.signal(sig, [r.label for r in alive])
            end = time.monotonic() + wait_s
            while time.monotonic() < end and any(r.returncode is None for r in alive):
                for r in alive:
                    if r.returncode is not None and r.label not in self.stop_times:
                        self.stop_times[r.label] = time.monotonic() - t0
                time.sleep(0.01)
        for r in chosen:
            if r.returncode is not None and r.label not in self.stop_times and r.label not in gone:
                self.stop_times[r.label] = time.monotonic() - t0
        if labels is None:              # nothing of the graph outlives it (a node's child left behind)
            self.signal_group(signal.SIGKILL)
        for r in chosen:
            r.reader.join(2.0)
        return {r.label: r.returncode for r in chosen}

    def __enter__(self) -> "ProcessGraph":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --- `vam-stack ros-graph` ------------------------------------------------------------------------

def add_arguments(p) -> None:
    p.add_argument("launch", choices=LAUNCH_FILES, help="the launch file whose processes to start")
    p.add_argument("arguments", nargs="*", metavar="NAME:=VALUE",
                   help="launch arguments, as `ros2 launch` takes them (e.g. sim:=mujoco preset:=yam64)")
    p.add_argument("--log-dir", default=None, help="one log file per process (default: a new temporary folder)")
    p.add_argument("--quiet", action="store_true", help="write the processes' output only to the log files")
    p.add_argument("--dry-run", action="store_true", help="print each command line and its parameters, start nothing")


def parse_assignments(items) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise ValueError(f"launch arguments are NAME:=VALUE, got {item!r}")
        out[name] = value
    return out


def run(args) -> int:
    graph = ProcessGraph(args.launch, parse_assignments(args.arguments), log_dir=args.log_dir,
                         echo=None if args.quiet else sys.stdout)
    if args.dry_run:
        for proc in graph.processes:
            print(" ".join(proc.argv("<overrides.yaml>" if proc.overrides else None)))
            if proc.overrides:
                print("  overrides: " + ", ".join(f"{k}={v!r}" for k, v in proc.overrides.items()))
        return 0

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    # stopped from outside (a service manager's SIGTERM): stop the graph as Ctrl-C would. Here ros-graph
    # differs from `ros2 launch`, which dies at SIGTERM and leaves every node running. SIGINT gets the
    # handler too: started from a script with `&`, this process begins with SIGINT ignored (a background
    # job of a non-interactive shell), and `pkill -INT` (docs/bring_up.md) would do nothing
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    graph.start()
    print(f"[ros-graph] {args.launch}: {len(graph.processes)} processes, logs in {graph.log_dir}; Ctrl-C stops them",
          flush=True)
    # a process that exits by itself is reported and the others keep running, as under ros2 launch:
    # only the operator (Ctrl-C, SIGTERM) stops them. SIGINT is their operator's stop: the driver turns
    # torque off, which must not follow from another node's exit (a YAM has no brakes).
    said: set[str] = set()
    try:
        while len(graph.exited()) < len(graph.running):
            for label, code in graph.exited().items():
                if label not in said:
                    said.add(label)
                    print(f"[ros-graph] {label} exited with code {code}; the others keep running (Ctrl-C stops "
                          f"them)", flush=True)
            time.sleep(0.2)
        print("[ros-graph] every process exited", flush=True)
    except KeyboardInterrupt as e:
        print(f"[ros-graph] {str(e) or 'Ctrl-C'}: SIGINT to the process group (every node and its children)",
              flush=True)

    def again(signum, _frame):       # as launch: a second Ctrl-C does not cut the stop short
        print(f"[ros-graph] {signal.Signals(signum).name} again: still stopping (SIGTERM {graph.sigterm_timeout_s:g} s "
              f"after the SIGINT, SIGKILL {graph.sigkill_timeout_s:g} s later)", flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, again)
    codes = graph.stop()
    for label, code in codes.items():
        when = f" ({graph.stop_times[label]:.2f} s after the SIGINT)" if label in graph.stop_times else ""
        print(f"[ros-graph] {label}: exit code {code}{when}")
    # as `ros2 launch` (3.4.3) returns: 0 once the graph is down, whatever a node's exit code (launch
    # returns 1 only for an error of launch itself); the nodes' codes are printed above
    return 0
