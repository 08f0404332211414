"""A small typed fake of rclpy for tests where real rclpy cannot be installed.

Only `tests/conftest.py` puts this directory on sys.path, and only when `import rclpy` fails.
It covers what vam_stack's nodes and their tests use, with the rules of rclpy (Humble and
Jazzy) and rcl where a node could break them: init/shutdown/ok (a shut-down default context
is replaced by a new one), ROS arguments (`--ros-args` with -p, --params-file, -r for
__node/__ns and names, --log-level; unknown ones refused) and parameter files with rcl's YAML
typing and node-name matching (rclpy._arguments); Node parameters with rclpy's type and range
rules; publishers, subscriptions, timers, services and clients in callback groups; the
logger's per-call-site rules (rclpy.impl.rcutils_logger); QoSProfile's constructor rules and
QoS matching; SingleThreadedExecutor and a thread-pool MultiThreadedExecutor honouring
callback groups; spin/spin_once/spin_until_future_complete. Message classes come from rosbags'
ROS 2 typestore and check field types as rclpy's generated classes do; every message crosses
a CDR serialisation between publisher and subscriber.

Where it differs from rclpy: one process only; ROS time is the system clock (no /clock);
no parameter services (ros2 param) and no coroutine callbacks; two message types on one topic
raise TypeError at once (ROS would just not connect them). Callbacks are dispatched in
creation order, so tests must not rely on the order of messages across different topics (ROS
does not guarantee it either).
"""
from __future__ import annotations

import threading

from rclpy.context import Context
from rclpy.exceptions import NotInitializedException

__all__ = ["init", "shutdown", "try_shutdown", "ok", "spin", "spin_once", "spin_until_future_complete",
           "create_node", "get_default_context", "get_global_executor"]

IS_FAKE = True  # tests may say which rclpy they ran against
_context_lock = threading.Lock()
_default_context: Context | None = None
_executor = None


def get_default_context(*, shutting_down: bool = False) -> Context:
    """The default context; shutting it down replaces it with a new one (rclpy.utilities)."""
    global _default_context
    with _context_lock:
        if _default_context is None:
            _default_context = Context()
        ctx = _default_context
        if shutting_down:
            _default_context = None
        return ctx


def init(*, args=None, context=None, domain_id=None, signal_handler_options=None) -> None:
    (get_default_context() if context is None else context).init(args, domain_id=domain_id)


def ok(*, context=None) -> bool:
    return (get_default_context() if context is None else context).ok()


def shutdown(*, context=None, uninstall_handlers=None) -> None:
    (get_default_context(shutting_down=True) if context is None else context).shutdown()


def try_shutdown(*, context=None, uninstall_handlers=None) -> None:
    global _default_context
    if context is not None:
        context.try_shutdown()
        return
    with _context_lock:
        if _default_context is None:
            _default_context = Context()
        _default_context.try_shutdown()
        if not _default_context.ok():
            _default_context = None


def create_node(node_name: str, **kwargs):
    from rclpy.node import Node

    return Node(node_name, **kwargs)


def get_global_executor():
    global _executor
    from rclpy.executors import SingleThreadedExecutor

    if _executor is None:
        ctx = get_default_context()
        if not ctx.ok():
            raise NotInitializedException()
        _executor = SingleThreadedExecutor()

        def reset_executor():
            global _executor
            if _executor is not None:
                _executor.shutdown()
                _executor = None
        ctx.on_shutdown(reset_executor)
    return _executor


def spin_once(node, *, executor=None, timeout_sec=None) -> None:
    executor = get_global_executor() if executor is None else executor
    try:
        executor.add_node(node)
        executor.spin_once(timeout_sec=timeout_sec)
    finally:
        executor.remove_node(node)


def spin(node, executor=None) -> None:
    executor = get_global_executor() if executor is None else executor
    try:
        executor.add_node(node)
        while executor.context.ok():
            executor.spin_once()
    finally:
        executor.remove_node(node)


def spin_until_future_complete(node, future, executor=None, timeout_sec=None) -> None:
    executor = get_global_executor() if executor is None else executor
    added = False
    try:
        added = executor.add_node(node)
        executor.spin_until_future_complete(future, timeout_sec)
    finally:
        if added:
            executor.remove_node(node)
