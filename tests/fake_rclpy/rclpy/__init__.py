"""A small typed fake of rclpy for tests where real rclpy cannot be installed.

Only `tests/conftest.py` puts this directory on sys.path, and only when `import rclpy` fails.
It covers what vam_stack's nodes and their tests use: init/shutdown/ok, Node (parameters
with descriptors, publishers, subscriptions, timers, services, clients, logging, graph
queries), QoS matching, executors, spin/spin_once/spin_until_future_complete. Message
classes come from rosbags' ROS 2 typestore and check field types as rclpy's generated
classes do; every message crosses a CDR serialisation between publisher and subscriber.

Where it differs from rclpy: one process only; ROS time is the system clock (no /clock);
executors run callbacks one at a time; `--ros-args -p name:=value` is parsed but parameter
files are not; two message types on one topic raise TypeError at once (ROS would just not
connect them). Callbacks are dispatched in creation order, so tests must not rely on the
order of messages across different topics (ROS does not guarantee it either).
"""
from __future__ import annotations

from rclpy import _graph
from rclpy.exceptions import NotInitializedException

__all__ = ["init", "shutdown", "try_shutdown", "ok", "spin", "spin_once", "spin_until_future_complete",
           "create_node", "get_default_context", "get_global_executor"]

IS_FAKE = True  # tests may say which rclpy they ran against
_context = _graph.Context()
_executor = None


def get_default_context():
    return _context


def init(*, args=None, context=None, domain_id=None, signal_handler_options=None) -> None:
    ctx = context or _context
    if ctx.ok:
        raise RuntimeError("Context.init() must only be called once")
    ctx.__init__()
    ctx.cli_overrides = _parse_param_args(args or [])
    ctx.ok = True


def _parse_param_args(args) -> dict:
    """`--ros-args -p name:=value` pairs (YAML-typed values, as rcl parses them)."""
    import yaml

    out, it = {}, iter(list(args))
    for a in it:
        if a in ("-p", "--param"):
            name, _, text = next(it).partition(":=")
            out[name] = yaml.safe_load(text)
    return out


def ok(*, context=None) -> bool:
    return (context or _context).ok


def shutdown(*, context=None, uninstall_handlers=None) -> None:
    ctx = context or _context
    if not ctx.ok:
        raise RuntimeError("Context must be initialized before it can be shutdown")
    ctx.ok = False
    ctx.notify()


def try_shutdown(*, context=None, uninstall_handlers=None) -> None:
    ctx = context or _context
    if ctx.ok:
        shutdown(context=ctx)


def create_node(node_name: str, **kwargs):
    from rclpy.node import Node

    return Node(node_name, **kwargs)


def get_global_executor():
    global _executor
    from rclpy.executors import SingleThreadedExecutor

    if _executor is None or _executor.context is not _context:
        _executor = SingleThreadedExecutor()
    return _executor


def _with(node, executor):
    if not _context.ok:
        raise NotInitializedException()
    executor = executor or get_global_executor()
    executor.add_node(node)
    return executor


def spin_once(node, *, executor=None, timeout_sec=None) -> None:
    ex = _with(node, executor)
    try:
        ex.spin_once(timeout_sec)
    finally:
        ex.remove_node(node)


def spin(node, executor=None) -> None:
    ex = _with(node, executor)
    try:
        ex.spin()
    finally:
        ex.remove_node(node)


def spin_until_future_complete(node, future, executor=None, timeout_sec=None) -> None:
    ex = _with(node, executor)
    try:
        ex.spin_until_future_complete(future, timeout_sec)
    finally:
        ex.remove_node(node)
