"""The fake's in-process middleware: topics, endpoints, queues, services; one per context.

Publishing serialises the message to CDR at once (type checked against the publisher's
class); each matched subscription keeps the bytes in a keep-last queue of its QoS depth and
deserialises on take, so a callback sees exactly what crossed the wire. Transient-local
writers keep their last `depth` messages for readers that join later. A service call
carries the request bytes to the service and the response bytes back to the client; the
client's future completes when an executor spinning the client's node takes the response
(in the client's callback group), as in rclpy.
"""
from __future__ import annotations

import threading
import time as _time
import weakref
from collections import deque

from rclpy import _messages
from rclpy.qos import DurabilityPolicy, HistoryPolicy, check_c_profile, compatible


class Middleware:
    """What one context's processes share (the fake's DDS)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.publishers: list["Publisher"] = []
        self.subscriptions: list["Subscription"] = []
        self.services: dict[str, "Service"] = {}
        self.topic_types: dict[str, str] = {}

    def notify(self):
        with self.cond:
            self.cond.notify_all()

    def claim_topic(self, topic: str, msgtype: str) -> None:
        known = self.topic_types.get(topic)
        if known is not None and known != msgtype:
            raise TypeError(f"fake rclpy: topic {topic!r} already carries {known}, not {msgtype}")
        self.topic_types[topic] = msgtype

    def add_endpoint(self, ep) -> None:
        with self.lock:
            self.claim_topic(ep.topic_name, ep.msgtype)
            (self.publishers if isinstance(ep, Publisher) else self.subscriptions).append(ep)
            if isinstance(ep, Subscription) and ep.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL:
                for pub in self.publishers:
                    if pub.topic_name == ep.topic_name and compatible(pub.qos_profile, ep.qos_profile):
                        ep.queue.extend(pub.history)
            self.cond.notify_all()

    def remove_endpoint(self, ep) -> None:
        with self.lock:
            for coll in (self.publishers, self.subscriptions):
                if ep in coll:
                    coll.remove(ep)

    def add_service(self, srv) -> None:
        with self.lock:
            if srv.srv_name in self.services:
                raise RuntimeError(f"fake rclpy: service {srv.srv_name!r} already exists")
            self.services[srv.srv_name] = srv

    def remove_service(self, srv) -> None:
        with self.lock:
            if self.services.get(srv.srv_name) is srv:
                del self.services[srv.srv_name]


_rosout_lock = threading.Lock()
_rosout_nodes: dict[str, list] = {}  # logger name -> weak refs to the nodes with that logger


def register_rosout(logger_name: str, node) -> None:
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    with _rosout_lock:
        _rosout_nodes.setdefault(logger_name, []).append(weakref.ref(node))
    _rclpy.register_rosout(logger_name, _rosout_sink)


def unregister_rosout(logger_name: str, node) -> None:
    with _rosout_lock:
        refs = _rosout_nodes.get(logger_name, [])
        _rosout_nodes[logger_name] = [r for r in refs if r() is not None and r() is not node]


def _rosout_sink(severity, name, message, function, file, line) -> None:
    """rcl's rosout handler: a node's logger's messages go out on that node's /rosout (the
    newest live node of that name, where several exist)."""
    with _rosout_lock:
        nodes = [r() for r in _rosout_nodes.get(name, [])]
    nodes = [n for n in nodes if n is not None and not n._destroyed and n.context.ok()]
    if nodes:
        nodes[-1]._rosout(severity, name, message, function, file, line)


def _type_name(cls) -> str:
    name = getattr(cls, "_TYPE", None)
    if not isinstance(name, str):
        raise TypeError(f"{cls!r} is not a message class of the fake rclpy")
    return name


def _queue(qos) -> deque:
    return deque(maxlen=None if qos.history == HistoryPolicy.KEEP_ALL else max(qos.depth, 1))


class Publisher:
    def __init__(self, node, msg_type, topic: str, qos):
        check_c_profile(qos)
        self.node, self.msg_type, self.topic_name = node, msg_type, topic
        self.qos_profile = qos
        self.msgtype = _type_name(msg_type)
        self.history = _queue(qos)
        self.published = 0
        self.destroyed = False

    @property
    def topic(self) -> str:
        return self.topic_name

    def publish(self, msg) -> None:
        if isinstance(msg, (bytes, bytearray, memoryview)):  # serialized, as rclpy accepts
            data = bytes(msg)
            _messages.deserialize(data, self.msgtype)
        elif not isinstance(msg, self.msg_type):
            raise TypeError(f"Expected {self.msg_type.__name__}, got {type(msg)}")
        else:
            data = _messages.serialize(msg)
        if self.destroyed:
            from rclpy._rclpy_pybind11 import InvalidHandle
            raise InvalidHandle(f"publisher on {self.topic_name} was destroyed")
        ctx = self.node.context
        with ctx.cond:
            self.published += 1
            if self.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL:
                self.history.append(data)
            for sub in ctx.subscriptions:
                if sub.topic_name == self.topic_name and compatible(self.qos_profile, sub.qos_profile):
                    sub.queue.append(data)
            ctx.cond.notify_all()

    def get_subscription_count(self) -> int:
        ctx = self.node.context
        with ctx.lock:
            return sum(s.topic_name == self.topic_name and compatible(self.qos_profile, s.qos_profile)
                       for s in ctx.subscriptions)

    def destroy(self) -> None:
        self.node.destroy_publisher(self)


class Subscription:
    def __init__(self, node, msg_type, topic: str, callback, qos, callback_group, raw: bool = False):
        check_c_profile(qos)
        self.node, self.msg_type, self.topic_name, self.callback = node, msg_type, topic, callback
        self.qos_profile, self.callback_group, self.raw = qos, callback_group, raw
        self.msgtype = _type_name(msg_type)
        self.queue = _queue(qos)
        self.destroyed = False
        self._executor_event = False

    @property
    def topic(self) -> str:
        return self.topic_name

    def take(self):
        data = self._take()
        return None if data is None else (data if self.raw else _messages.deserialize(data, self.msgtype))

    # --- executor interface ---
    def _due(self):
        return None

    def _ready(self, now: float) -> bool:
        return not self.destroyed and bool(self.queue)

    def _take(self):
        with self.node.context.lock:
            if not self.queue:
                return None
            data = self.queue.popleft()
        return data if self.raw else _messages.deserialize(data, self.msgtype)

    def _execute(self, msg) -> None:
        if msg is not None:
            self.callback(msg)

    def destroy(self) -> None:
        self.node.destroy_subscription(self)


class Service:
    def __init__(self, node, srv_type, name: str, callback, qos, callback_group):
        check_c_profile(qos)
        self.node, self.srv_type, self.srv_name, self.callback = node, srv_type, name, callback
        self.qos_profile, self.callback_group = qos, callback_group
        self.requests: deque = deque()
        self.destroyed = False
        self._executor_event = False

    def _due(self):
        return None

    def _ready(self, now: float) -> bool:
        return not self.destroyed and bool(self.requests)

    def _take(self):
        with self.node.context.lock:
            if not self.requests:
                return None
            data, client, future = self.requests.popleft()
        return _messages.deserialize(data, self.srv_type.Request._TYPE), (client, future)

    def _execute(self, request_and_header) -> None:
        if request_and_header is None:
            return
        request, header = request_and_header
        response = self.callback(request, self.srv_type.Response())
        self.send_response(response, header)

    def send_response(self, response, header) -> None:
        if not isinstance(response, self.srv_type.Response):
            raise TypeError(f"service {self.srv_name} callback returned {type(response).__name__}, "
                            f"not {self.srv_type.Response.__name__}")
        client, future = header
        data = _messages.serialize(response)
        ctx = client.node.context
        with ctx.cond:
            if not client.destroyed:
                client.responses.append((data, future))
            ctx.cond.notify_all()

    def destroy(self) -> None:
        self.node.destroy_service(self)


class Client:
    def __init__(self, node, srv_type, name: str, qos, callback_group):
        check_c_profile(qos)
        self.node, self.srv_type, self.srv_name = node, srv_type, name
        self.qos_profile, self.callback_group = qos, callback_group
        self.responses: deque = deque()
        self.destroyed = False
        self._executor_event = False

    def service_is_ready(self) -> bool:
        return self.srv_name in self.node.context.services

    def wait_for_service(self, timeout_sec: float | None = None) -> bool:
        """Polls the graph like rclpy (every 0.1 s until ready or the timeout; forever without one)."""
        end = None if timeout_sec is None else _time.monotonic() + timeout_sec
        while self.node.context.ok() and not self.service_is_ready():
            if end is not None and _time.monotonic() >= end:
                return False
            _time.sleep(0.1 if end is None else max(min(0.1, end - _time.monotonic()), 0.0))
        return self.service_is_ready()

    def call_async(self, request):
        from rclpy.task import Future

        if not isinstance(request, self.srv_type.Request):
            raise TypeError(f"Expected {self.srv_type.Request.__name__}, got {type(request)}")
        future = Future()
        ctx = self.node.context
        with ctx.cond:
            srv = ctx.services.get(self.srv_name)
            if srv is not None:
                srv.requests.append((_messages.serialize(request), self, future))
                ctx.cond.notify_all()
        return future

    def call(self, request, timeout_sec: float | None = None):
        """Blocks until the response arrives: another thread must spin this client's node."""
        event = threading.Event()
        future = self.call_async(request)
        future.add_done_callback(lambda _f: event.set())
        if not event.wait(timeout_sec):
            future.cancel()
            return None
        return future.result()

    def _due(self):
        return None

    def _ready(self, now: float) -> bool:
        return not self.destroyed and bool(self.responses)

    def _take(self):
        with self.node.context.lock:
            if not self.responses:
                return None
            data, future = self.responses.popleft()
        return _messages.deserialize(data, self.srv_type.Response._TYPE), future

    def _execute(self, response_and_future) -> None:
        if response_and_future is None:
            return
        response, future = response_and_future
        if not future.done():
            future.set_result(response)

    def destroy(self) -> None:
        self.node.destroy_client(self)
