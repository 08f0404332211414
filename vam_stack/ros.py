"""What every vam_stack node shares: QoS from the topic table, message-class conversion,
parameters declared with descriptors, stamps.

Messages are built and read by `vam_stack.msgs` as rosbags dataclasses (real ROS 2 field
layouts). `to_ros` turns one into the rclpy class of the same type, field by field, in the
form rclpy's generated setters accept (numeric sequences as `array.array`, fixed arrays as
numpy arrays, `byte` fields as one-byte `bytes`); `from_ros` goes back. Both walk the field
definitions of the typestore, so they work for any message type. The 30 Hz joint states and
targets skip this copy: `vam_stack.rclpy_msgs` builds them as rclpy messages directly, and
`msgs.joint_state_to_numpy` reads an arrived one as it is.

rclpy is imported lazily, inside the functions that need it: importing this module does not
need ROS.
"""
from __future__ import annotations

import array
import importlib
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
from rosbags.typesys.base import Nodetype

from vam_stack import image_msgs, msg_base, msgs
from vam_stack.process_exit import exit_now, process_name
from vam_stack.refusals import guarded, refusal_log
from vam_stack.topics import Topic, resolve

_TYPECODES = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
              "int64": "q", "uint64": "Q", "float32": "f", "float64": "d"}


class ParameterError(ValueError):
    """A node parameter has a value the node cannot use; the message names it."""


# --- QoS and classes ----------------------------------------------------------------------

def qos(key_or_name: str | Topic, reader: bool = False) -> Any:
    """rclpy QoSProfile of a topic-table row (key like "tr" or name like "/vam/tr"): the row's
    own for a publisher; for a subscription (`reader`), a latched row is read volatile."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    spec = (key_or_name if isinstance(key_or_name, Topic) else resolve(key_or_name)).qos_spec
    latched = spec.durability == "transient_local" and not reader
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=spec.depth,
        reliability=(ReliabilityPolicy.RELIABLE if spec.reliability == "reliable"
                     else ReliabilityPolicy.BEST_EFFORT),
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


@lru_cache(maxsize=None)
def ros_class(msgtype: str) -> type:
    """rclpy message class of e.g. "sensor_msgs/msg/Image" (imports sensor_msgs.msg; looked up once)."""
    pkg, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


def publisher(node: Any, key: str) -> Any:
    """A publisher for a topic-table row: its name, its type, its QoS."""
    t = resolve(key)
    return node.create_publisher(ros_class(t.msgtype), t.name, qos(t))


def subscription(node: Any, key: str, callback: Any, callback_group: Any = None, guard: bool = True) -> Any:
    """A subscription for a topic-table row: its name, its type, its QoS as a reader; its callback
    `guarded` (an exception a message causes refuses that message, rate-limited in the log, and the
    node keeps spinning) unless `guard` is false.

    A latched (transient-local) row is read volatile. A volatile reader matches every publisher
    a person would use: a latched one (it then gets each new message, not the kept one) and a
    volatile one (Jazzy's plain `ros2 topic pub`), where a transient-local reader is incompatible
    with the latter, gets nothing from it, and makes it warn about incompatible QoS on every
    publish. What is given up: a value published before the node started is not replayed to it.
    The nodes are built not to need it: the e-stop and instruction are events to them (an e-stop
    latches inside each node; a node starts holding), and the one late-join publisher of an
    instruction, libero_bridge, announces an episode once a policy is there to hear it."""
    t = resolve(key)
    if guard:
        callback = guarded(node, f"message on {t.name}", callback)
    return node.create_subscription(ros_class(t.msgtype), t.name, callback, qos(t, reader=True),
                                    callback_group=callback_group)


def latched_subscription(node: Any, key: str, callback: Any, callback_group: Any = None) -> Any:
    """A transient-local reader of a latched row whose writers are all latched (the e-stop service's
    state, vam_stack/estop.py): it gets their kept message when it joins. (`subscription` reads latched
    rows volatile, which a person's volatile `ros2 topic pub` needs.)"""
    from rclpy.qos import DurabilityPolicy

    t = resolve(key)
    profile = qos(t)
    if profile.durability != DurabilityPolicy.TRANSIENT_LOCAL:
        raise ValueError(f"{t.name} is not a latched topic ({t.qos})")
    return node.create_subscription(ros_class(t.msgtype), t.name, guarded(node, f"message on {t.name}", callback),
                                    profile, callback_group=callback_group)


# --- conversion ---------------------------------------------------------------------------

def _fields(msgtype: str):
    return msgs.typestore().fielddefs[msgtype][1]


def to_ros(msg: Any) -> Any:
    """The rclpy message equal to the rosbags message `msg`."""
    msgtype = msg_base.msgtype_of(msg)
    kwargs = {}
    for name, (node, detail) in _fields(msgtype):
        v = getattr(msg, name)
        if node == Nodetype.BASE:
            base = detail[0]
            v = bytes([int(v)]) if base == "byte" else v
            v = float(v) if base in ("float32", "float64") else v
            v = int(v) if base in _TYPECODES and base[0] in "ui" else v
        elif node == Nodetype.NAME:
            v = to_ros(v)
        else:
            (enode, edetail), _size = detail
            if enode == Nodetype.NAME:
                v = [to_ros(x) for x in v]
            elif edetail[0] in _TYPECODES:
                arr = np.ascontiguousarray(v, dtype=np.dtype(_TYPECODES[edetail[0]]))
                v = arr if node == Nodetype.ARRAY else array.array(_TYPECODES[edetail[0]], arr.tobytes())
            else:
                v = list(v)
        kwargs[name] = v
    return ros_class(msgtype)(**kwargs)


def from_ros(msg: Any, msgtype: str) -> Any:
    """The rosbags message equal to the rclpy message `msg` of type `msgtype`."""
    kwargs = {}
    for name, (node, detail) in _fields(msgtype):
        v = getattr(msg, name)
        if node == Nodetype.BASE:
            v = v[0] if detail[0] == "byte" and isinstance(v, (bytes, bytearray)) else v
        elif node == Nodetype.NAME:
            v = from_ros(v, detail)
        else:
            (enode, edetail), _size = detail
            if enode == Nodetype.NAME:
                v = [from_ros(x, edetail) for x in v]
            elif edetail[0] in _TYPECODES:
                v = np.array(v, dtype=np.dtype(_TYPECODES[edetail[0]]))
            else:
                v = list(v)
        kwargs[name] = v
    return msg_base.msg_class(msgtype)(**kwargs)


def stamp(node: Any) -> Any:
    """The node's clock now, as a builtin_interfaces/Time for `vam_stack.msgs` builders."""
    return msgs.time_from_ns(node.get_clock().now().nanoseconds)


# --- parameters ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One node parameter: its default (which fixes its type), meaning, range, mutability."""

    name: str
    default: bool | int | float | str
    description: str  # shown by `ros2 param describe`; say the unit
    range: tuple[float, float] | None = None  # inclusive bounds for int/float parameters
    choices: tuple[str, ...] = ()  # allowed values of a string parameter
    read_only: bool = True  # most parameters shape the node at start-up and cannot change later


def params_from(cls: type, names: Sequence[str], *, rename: dict[str, str] | None = None,
                ranges: dict[str, tuple[float, float]] | None = None,
                choices: dict[str, Sequence[str]] | None = None, live: Sequence[str] = ()) -> tuple[Param, ...]:
    """Parameters generated from the fields `names` of the config dataclass `cls`: the default is
    the field's, the description its source comment (`vam_stack.config.field_docs`), so neither
    is written twice. `rename` maps a field to its parameter name, `ranges`/`choices` give the
    descriptor's bounds (the dataclass still validates the value), `live` the fields a running
    node accepts changes to (applied at the next use). Keyed by field name."""
    import dataclasses

    from vam_stack.config import field_docs

    rename, ranges, choices = rename or {}, ranges or {}, choices or {}
    docs = field_docs(cls)
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(names) - set(by_name)) + sorted((set(rename) | set(ranges) | set(choices) | set(live))
                                                          - set(names))
    if unknown:
        raise ValueError(f"params_from({cls.__name__}): unknown or unselected fields {unknown}")
    out = []
    for name in names:
        f = by_name[name]
        default = f.default
        if default is dataclasses.MISSING or not isinstance(default, (bool, int, float, str)):
            raise ValueError(f"params_from({cls.__name__}): field {name!r} has no plain default ({default!r})")
        doc = docs[name] + (" (live: applies at the next replan)" if name in live else "")
        out.append(Param(rename.get(name, name), default, doc, range=ranges.get(name),
                         choices=tuple(choices.get(name, ())), read_only=name not in live))
    return tuple(out)


def declare(node: Any, params: Sequence[Param]) -> dict[str, Any]:
    """Declare every parameter with a descriptor and return {name: value}.

    Out-of-range values are rejected by rclpy itself (from the descriptor's range); choices
    are checked here. Either way the node does not start, and the error names the value.
    """
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    values: dict[str, Any] = {}
    for p in params:
        d = ParameterDescriptor(description=p.description, read_only=p.read_only)
        if p.range is not None:
            lo, hi = p.range
            if isinstance(p.default, float):
                d.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
            else:
                d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=1)]
            d.additional_constraints = f"in [{lo}, {hi}]"
        if p.choices:
            d.additional_constraints = "one of: " + ", ".join(p.choices)
        value = node.declare_parameter(p.name, p.default, d).value
        if p.choices and value not in p.choices:
            raise ParameterError(f"parameter {p.name!r} must be one of {list(p.choices)}, got {value!r}")
        values[p.name] = value
    return values


class SafeLifecycle:
    """For a LifecycleNode subclass (listed before it): every way out of the active states leaves
    the node safe. Cleanup, shutdown and error call the node's idempotent `_release()` (stop, hold,
    let go of the hardware or the policy) and succeed; `autostart()` configures and activates at
    once (`ros2 launch` without a lifecycle manager) and releases before raising when a step fails.

    A transition that is not valid from the current state (`cleanup` while active) is refused as
    the lifecycle refuses it (ChangeState answers success false; rcl's own error, "Transition is
    not registered", is logged with the transitions valid from here) and the node stays in its
    state: rclpy raises it from inside the service callback, which would end the node.
    `hold_on_exit(reason)` is what `spin_nodes` calls when an exception (not the operator) ends
    the process: the node's `destroy_node` then leaves its hardware holding, powered."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._exit_hold: str | None = None   # why the process ends without an operator asking (None: it asked)
        self._guard_change_state()

    def _release(self) -> None:
        raise NotImplementedError

    def hold_on_exit(self, reason: str) -> None:
        """The process ends on an internal error, not an operator's request: say so; `destroy_node`
        holds (a driver keeps torque on) instead of releasing as an operator's stop would."""
        self._exit_hold = reason
        self.get_logger().error(f"internal error, the node stops: {reason}")

    def _guard_change_state(self) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        srv = getattr(self, "_service_change_state", None)
        if srv is None:               # enable_communication_interface=False: no services to guard
            return
        inner = srv.callback
        log = refusal_log(self, "lifecycle transition", level="warning")

        def change_state(request, response):
            state = self._state_machine.current_state[1]
            try:
                return inner(request, response)
            except _rclpy.RCLError as e:        # not valid from this state: the lifecycle's own refusal
                valid = sorted({t[1] for t in self._state_machine.available_transitions})
                labels = {t[0]: t[1] for t in self._state_machine.transition_graph}   # id -> rcl's label
                asked = request.transition.label or labels.get(request.transition.id, f"id {request.transition.id}")
                why = str(e).split(", at ")[0].rsplit(": ", 1)[-1].rstrip(".")    # rcl: "Transition is not registered"
                log.refuse(f"{asked!r} is not a transition from state {state!r} (rcl: {why}); "
                           f"valid from here: {', '.join(valid) or 'none'}")
                response.success = False
                return response
        srv.callback = change_state

    def _released(self) -> Any:
        from rclpy.lifecycle import TransitionCallbackReturn

        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state) -> Any:
        return self._released()

    def on_shutdown(self, state) -> Any:
        return self._released()

    def on_error(self, state) -> Any:
        return self._released()               # back to unconfigured, safe

    def autostart(self, failed: Any) -> None:
        """Configure and activate; on a failed step, release and raise `failed(step_name)`."""
        from rclpy.lifecycle import TransitionCallbackReturn

        for name, trigger in (("configure", self.trigger_configure), ("activate", self.trigger_activate)):
            if trigger() != TransitionCallbackReturn.SUCCESS:
                self._release()
                raise failed(name)


def config_path(value: str, default_name: str) -> str:
    """A config-file parameter: "" means config/<default_name> of the installed package; a
    bare file name that is not in the working directory is looked up in config/ too
    (`camera_config:=cameras_synthetic.yaml`; `vam_stack.paths.config_file`, which the launch check uses)."""
    from vam_stack.paths import config_file

    return str(config_file(value, default_name))


def image(node: Any, row: str | Topic, array: np.ndarray, stamp_time: Any = None) -> Any:
    """rclpy Image of an RGB array for a topic-table row (its frame id), stamped now by default."""
    t = row if isinstance(row, Topic) else resolve(row)
    return to_ros_bytes(image_msgs.image_msg(array, stamp(node) if stamp_time is None else stamp_time, t.frame_id))


def to_ros_bytes(msg: Any) -> Any:
    """`to_ros` of an Image or CompressedImage with its pixel bytes copied once, straight into the
    rclpy field (the generic path and rclpy's constructor go through Python bytes: ~0.27 ms more
    for a 672x168 rgb8 frame)."""
    import dataclasses

    out = to_ros(dataclasses.replace(msg, data=np.empty(0, np.uint8)))
    data = array.array("B")
    data.frombytes(np.ascontiguousarray(msg.data, dtype=np.uint8))
    out.data = data
    return out


def diagnostics(node: Any, statuses: Sequence[dict]) -> Any:
    """rclpy DiagnosticArray from dicts {"task" (or "name"), "level", "message", "values",
    "hardware_id"}, named as diagnostic_updater names them: `<node name>: <task>` with the node's
    name as it runs (remapped or not); a "name" given as `<anything>: <task>` keeps its task."""
    built = []
    for s in statuses:
        task = s.get("task") or s["name"].split(": ", 1)[-1]
        built.append(msgs.diagnostic_status(f"{node.get_name()}: {task}", s.get("values", {}), s.get("level", "ok"),
                                            s.get("message", ""), s.get("hardware_id", "")))
    return to_ros(msgs.diagnostic_array_msg(built, stamp(node)))


# every node's /diagnostics period, under diagnostic_updater's own parameter name
DIAGNOSTICS_PERIOD = Param("diagnostic_updater.period", 1.0, "period of /diagnostics [s] (diagnostic_updater's "
                           "parameter)", range=(0.1, 60.0))
RT_SWITCH_INTERVAL_S = 0.0005   # sys.setswitchinterval of a process with process_rt_priority > 0
PROCESS_RT_PRIORITY = Param("process_rt_priority", 0, "SCHED_FIFO priority of every thread of this node's process "
                            "(its ROS executor, the middleware's threads), set once the node is built: a thread "
                            "holding the GIL is then never preempted by ordinary work while the node's real-time "
                            "thread waits for it (vam_stack/realtime.py); 0 = normal scheduling", range=(0, 99))


# --- process entry point ------------------------------------------------------------------


def spin_nodes(nodes_factory: Any, args: Sequence[str] | None = None, num_threads: int = 1,
               callback_timeout_s: float = 3.0, exit_process: bool = False) -> None:
    """Every node process's `main()`: init, build, spin until SIGINT/SIGTERM or an external
    shutdown, then stop safely. SIGINT/SIGTERM are an operator's stop (Ctrl-C, launch's stop):
    each node releases its hardware as configured (the driver: torque off when
    `torque_off_on_exit`). An exception that ends the spin is not: each node's `hold_on_exit`
    runs first (the driver then keeps torque on, holding) and the exception ends the process. `nodes_factory(nodes)` appends each node as it is built (several
    for a simulator standing in for the hardware).

    The order on every exit path: stop taking callbacks (`executor.shutdown()`), wait up to
    `callback_timeout_s` for the ones still running in the pool, destroy the nodes in reverse
    build order (each `destroy_node` drives its hardware to a safe state and may still publish:
    the context is valid), and only then shut rclpy down. rclpy's own signal handlers are not
    installed: they shut the context down the moment the signal arrives, before a node can hold
    the arm (and a worker thread's last publish fails on the dead context). SIGINT and SIGTERM
    (what launch sends) both end the spin here; the spin wakes every 0.1 s to see them.

    `exit_process` (a node process's `main()`): after an operator's stop has run to the end, exit 0
    at once (`process_exit.exit_now`, why there); a failed start-up: one line, exit 1. Only from the
    main thread, where a process's `main()` runs: a `main()` run in another thread (a test running a
    node in its own interpreter) returns, or `os._exit(0)` would end the caller too (it ended the
    test suite at 34 % with exit code 0)."""
    import os
    import signal
    import threading

    exit_process = exit_process and threading.current_thread() is threading.main_thread()

    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from vam_stack.refusals import describe

    stop = threading.Event()
    previous, stopped, failure, spinning = {}, False, None, False
    exit_process = exit_process and threading.current_thread() is threading.main_thread()  # a process's own main
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list = []
    executor = None
    try:
        nodes_factory(nodes)
        # One thread unless a node needs more (the policy node: a service that waits up to
        # command_timeout_s must not delay its e-stop). rclpy's executors run in Python; the
        # multi-threaded one costs several times the CPU of the single-threaded one for the same
        # callbacks (docs/benchmarks.md, "ROS graph"), CPU the policy's inference needs on 2 cores.
        executor = MultiThreadedExecutor(num_threads=num_threads) if num_threads > 1 else SingleThreadedExecutor()
        for node in nodes:
            executor.add_node(node)
        _raise_process_priority(nodes)
        spinning = True
        while not stop.is_set() and executor.context.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException) as e:
        stopped = True
        if not spinning and isinstance(e, KeyboardInterrupt):
            print(f"{process_name(nodes)}: stopped during start-up by {e or 'a signal'}: exiting cleanly",
                  file=sys.stderr, flush=True)
    except BaseException as e:
        failure = None if stop.is_set() and isinstance(e, Exception) else e   # a stop first: it interrupted
        if failure is None:                     # the start-up (an import, an export) into this error
            print(f"{process_name(nodes)}: stopped during start-up by a signal (it interrupted: {describe(e)})",
                  file=sys.stderr, flush=True)
            stopped = True
        # not the operator: an exception ended the spin (or a node's start-up). A node with hardware
        # holds it powered (a YAM has no brakes) instead of releasing it as an operator's stop would.
        for node in nodes if failure is not None else ():
            hold = getattr(node, "hold_on_exit", None)
            if hold is not None:
                try:
                    hold(describe(e))
                except Exception:            # best effort: the destroy below still runs
                    pass
        if failure is not None and not (exit_process and isinstance(failure, Exception) and not nodes
                                        and not os.environ.get("VAM_DEBUG")):
            raise
    finally:
        try:
            if executor is not None:
                executor.shutdown(timeout_sec=0.0)
                _wait_for_callbacks(executor, callback_timeout_s)
        finally:
            try:
                for node in reversed(nodes):
                    node.destroy_node()
            finally:
                rclpy.try_shutdown()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
    if exit_process and (stopped or stop.is_set()):
        exit_now(0)
    if exit_process and failure is not None:
        print(f"{process_name(nodes)}: start-up failed: {describe(failure)} (VAM_DEBUG=1 shows the traceback)",
              file=sys.stderr, flush=True)
        exit_now(1)


def _raise_process_priority(nodes: list) -> None:
    """The highest `process_rt_priority` any node of this process declares, for all its threads."""
    from vam_stack.realtime import process_fifo

    name = PROCESS_RT_PRIORITY.name
    prio = max((int(n.get_parameter(name).value) for n in nodes
                if getattr(n, "has_parameter", None) and n.has_parameter(name)), default=0)
    if prio > 0:
        raised = process_fifo(prio)
        # a thread waiting for the GIL asks its holder to drop it after the switch interval (5 ms by
        # default): a real-time process hands it over within RT_SWITCH_INTERVAL_S instead
        sys.setswitchinterval(min(sys.getswitchinterval(), RT_SWITCH_INTERVAL_S))
        if raised:
            nodes[0].get_logger().info(f"{raised} threads of this process at SCHED_FIFO {prio} ({name}), GIL "
                                       f"switch interval {sys.getswitchinterval() * 1e3:.1f} ms")


def _wait_for_callbacks(executor: Any, timeout_s: float) -> None:
    """Wait (bounded) for callbacks still running in a MultiThreadedExecutor's pool: rclpy's
    `shutdown()` does not (Jazzy 7.1). The nodes lock what must not overlap their destruction
    (the driver's bus) either way; this only makes a clean exit the usual one."""
    import threading

    pool = getattr(executor, "_executor", None)     # the thread pool of MultiThreadedExecutor (Humble, Jazzy)
    if pool is None:
        return
    waiter = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
    waiter.start()
    waiter.join(timeout_s)


def spin_node(node_factory: Any, args: Sequence[str] | None = None, num_threads: int = 1,
              exit_process: bool = False) -> None:
    """`spin_nodes` for a process of one node."""
    spin_nodes(lambda nodes: nodes.append(node_factory()), args, num_threads, exit_process=exit_process)
