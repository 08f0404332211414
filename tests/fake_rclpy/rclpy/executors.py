"""Executors as rclpy/executors.py runs them (Humble and Jazzy).

An entity (timer, subscription, client, service) is dispatched when it is ready, not already
dispatched and not yet taken, and its callback group can execute it; the handler first asks
the group (`beginning_execution`; a refusal puts the entity back), takes the data (the timer's
call, the message, the response, the request), runs the callback and finally releases the
group. Each wait collects every ready entity, node by node (timers, subscriptions, clients,
services), and later spin_once calls hand them out before waiting again.

SingleThreadedExecutor runs the handler in the spinning thread and re-raises its exception;
when the context is shut down while it waits it raises ExternalShutdownException (rclpy.spin
lets it out, as rclpy does). MultiThreadedExecutor(num_threads) submits handlers to a
ThreadPoolExecutor, so callbacks of different groups, or of a ReentrantCallbackGroup, run in
parallel while a MutuallyExclusiveCallbackGroup runs one at a time; an exception in a
callback is raised from a later spin_once. A node belongs to one executor at a time
(add_node moves it, as Node.executor's setter does).
"""
from __future__ import annotations

import os
import threading
import time as _time
import warnings
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Executor", "SingleThreadedExecutor", "MultiThreadedExecutor", "ExternalShutdownException",
           "ShutdownException", "TimeoutException", "ConditionReachedException"]


class TimeoutException(Exception):
    """Signal that a timeout occurred."""


class ShutdownException(Exception):
    """Signal that the executor was shut down."""


class ExternalShutdownException(Exception):
    """Context has been shutdown."""


class ConditionReachedException(Exception):
    """Future has been completed."""


class _WorkTracker:
    def __init__(self):
        self._count = 0
        self._cond = threading.Condition()

    def __enter__(self):
        with self._cond:
            self._count += 1

    def __exit__(self, *exc):
        with self._cond:
            self._count -= 1
            self._cond.notify_all()

    def wait(self, timeout_sec=None) -> bool:
        timeout = None if timeout_sec is None or timeout_sec < 0 else timeout_sec
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout)


class Executor:
    def __init__(self, *, context=None) -> None:
        import rclpy

        self._context = rclpy.get_default_context() if context is None else context
        self._nodes: list = []
        self._nodes_lock = threading.RLock()
        self._is_shutdown = False
        self._work_tracker = _WorkTracker()
        self._pending: list = []  # ready entities of the last wait, not yet handed out
        self._context.on_shutdown(self.wake)

    @property
    def context(self):
        return self._context

    def add_node(self, node) -> bool:
        with self._nodes_lock:
            if node in self._nodes:
                return False
            self._nodes.append(node)
        node.executor = self
        self.wake()
        return True

    def remove_node(self, node) -> None:
        with self._nodes_lock:
            if node in self._nodes:
                self._nodes.remove(node)
                self._pending = [(e, n) for e, n in self._pending if n is not node]
        self.wake()

    def get_nodes(self) -> list:
        with self._nodes_lock:
            return list(self._nodes)

    def wake(self) -> None:
        self._context.notify()

    def create_task(self, callback, *args, **kwargs):
        """Runs `callback(*args, **kwargs)` on this executor's next spin (a Future of its result)."""
        from rclpy.task import Future

        future = Future()
        timer_like = _Task(future, callback, args, kwargs)
        with self._nodes_lock:
            self._pending.insert(0, (timer_like, None))
        self.wake()
        return future

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        self._is_shutdown = True
        self.wake()
        if not self._work_tracker.wait(timeout_sec):
            return False
        with self._nodes_lock:
            self._nodes = []
            self._pending = []
        return True

    # --- spinning ---
    def spin(self) -> None:
        while self._context.ok() and not self._is_shutdown:
            self.spin_once()

    def spin_until_future_complete(self, future, timeout_sec: float | None = None) -> None:
        future.add_done_callback(lambda _f: self.wake())
        if timeout_sec is None or timeout_sec < 0:
            while self._context.ok() and not future.done() and not self._is_shutdown:
                self.spin_once_until_future_complete(future, timeout_sec)
        else:
            end = _time.monotonic() + timeout_sec
            while self._context.ok() and not future.done() and not self._is_shutdown:
                self.spin_once_until_future_complete(future, max(end - _time.monotonic(), 0.0))
                if _time.monotonic() >= end:
                    return

    def spin_once(self, timeout_sec: float | None = None) -> None:
        raise NotImplementedError()

    def spin_once_until_future_complete(self, future, timeout_sec: float | None = None) -> None:
        raise NotImplementedError()

    # --- waiting ---
    @staticmethod
    def can_execute(entity) -> bool:
        return not entity._executor_event and entity.callback_group.can_execute(entity)

    def _next_pending(self):
        now = _time.monotonic()
        with self._nodes_lock:
            while self._pending:
                entity, node = self._pending.pop(0)
                if node is None:
                    return entity, node
                if node in self._nodes and not entity.destroyed and entity._ready(now) and self.can_execute(entity):
                    return entity, node
        return None

    def _collect(self, now: float):
        """Every ready entity that can execute, node by node; and the earliest timer due."""
        ready, due = [], None
        for node in self.get_nodes():
            for kind in (node.timers, node.subscriptions, node.clients, node.services):
                for entity in kind:
                    d = entity._due()
                    if d is not None and not entity._ready(now):
                        due = d if due is None else min(due, d)
                    if entity._ready(now) and self.can_execute(entity):
                        ready.append((entity, node))
        return ready, due

    def _wait_for_ready_callbacks(self, timeout_sec=None, condition=lambda: False):
        """(entity, node) of the next callback to run; raises TimeoutException,
        ShutdownException, ExternalShutdownException or ConditionReachedException."""
        end = None if timeout_sec is None or timeout_sec < 0 else _time.monotonic() + timeout_sec
        ctx = self._context
        while True:
            if self._is_shutdown:
                raise ShutdownException()
            if condition():
                raise ConditionReachedException()
            if not ctx.ok():
                raise ExternalShutdownException()
            got = self._next_pending()
            if got is not None:
                return got
            with ctx.cond:
                now = _time.monotonic()
                ready, due = self._collect(now)
                if ready:
                    with self._nodes_lock:
                        self._pending = ready
                    continue
                if end is not None and now >= end:
                    raise TimeoutException()
                waits = [t - now for t in (due, end) if t is not None]
                # woken by publish/requests/responses/new entities/group releases/shutdown; the
                # periodic re-check covers conditions nobody notifies (a future set elsewhere)
                ctx.cond.wait(max(min(min(waits) if waits else 0.05, 0.05), 0.0))

    def _handler(self, entity, node):
        """What rclpy's _make_handler builds: ask the group, take, run, release."""
        if node is None:  # a task from create_task
            entity.run()
            return
        entity._executor_event = True

        def handler():
            if self._is_shutdown or not entity.callback_group.beginning_execution(entity):
                entity._executor_event = False
                self.wake()
                return
            with self._work_tracker:
                try:
                    arg = entity._take()
                    entity._executor_event = False
                    self.wake()
                    entity._execute(arg)
                finally:
                    entity.callback_group.ending_execution(entity)
                    self.wake()
        return handler


class _Task:
    def __init__(self, future, callback, args, kwargs):
        self.future, self.callback, self.args, self.kwargs = future, callback, args, kwargs

    def run(self):
        try:
            self.future.set_result(self.callback(*self.args, **self.kwargs))
        except Exception as e:  # noqa: BLE001 - the task's future carries it
            self.future.set_exception(e)


class SingleThreadedExecutor(Executor):
    """Runs callbacks in the thread that calls spin/spin_once."""

    def __init__(self, *, context=None) -> None:
        super().__init__(context=context)

    def _spin_once_impl(self, timeout_sec=None, wait_condition=lambda: False) -> None:
        try:
            entity, node = self._wait_for_ready_callbacks(timeout_sec, wait_condition)
        except (ShutdownException, TimeoutException, ConditionReachedException):
            return
        handler = self._handler(entity, node)
        if handler is not None:
            handler()

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self._spin_once_impl(timeout_sec)

    def spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        future.add_done_callback(lambda _f: self.wake())
        self._spin_once_impl(timeout_sec, future.done)


class MultiThreadedExecutor(Executor):
    """Runs callbacks in a pool of `num_threads` threads (default: the CPUs this process may use)."""

    def __init__(self, num_threads: int | None = None, *, context=None) -> None:
        super().__init__(context=context)
        if num_threads is None:
            num_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            num_threads = num_threads or 2
        if num_threads == 1:
            warnings.warn("MultiThreadedExecutor is used with a single thread.\n"
                          "Use the SingleThreadedExecutor instead.")
        self._futures: list = []
        self._executor = ThreadPoolExecutor(num_threads, thread_name_prefix="fake-rclpy-executor")

    def _spin_once_impl(self, timeout_sec=None, wait_condition=lambda: False) -> None:
        try:
            entity, node = self._wait_for_ready_callbacks(timeout_sec, wait_condition)
        except (ExternalShutdownException, ShutdownException, TimeoutException, ConditionReachedException):
            pass
        else:
            handler = self._handler(entity, node)
            if handler is not None:
                self._futures.append(self._executor.submit(handler))
        for future in self._futures[:]:
            if future.done():
                self._futures.remove(future)
                future.result()  # raise any exceptions

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self._spin_once_impl(timeout_sec)

    def spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        future.add_done_callback(lambda _f: self.wake())
        self._spin_once_impl(timeout_sec, future.done)

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        done = super().shutdown(timeout_sec)
        if done:
            self._executor.shutdown(wait=False)
        return done
