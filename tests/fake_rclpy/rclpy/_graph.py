"""The fake's in-process middleware: topics, endpoints, queues, services; one per context.

Publishing serialises the message to CDR at once (type checked against the publisher's
class); each matched subscription keeps the bytes in a keep-last queue of its QoS depth and
deserialises on take, so a callback sees exactly what crossed the wire. Transient-local
writers keep their last `depth` messages for readers that join later.
"""
from __future__ import annotations

import threading
from collections import deque

from rclpy import _messages
from rclpy.qos import DurabilityPolicy, HistoryPolicy, as_profile, compatible


class Context:
    def __init__(self):
        self.ok = False
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.publishers: list["Publisher"] = []
        self.subscriptions: list["Subscription"] = []
        self.services: dict[str, "Service"] = {}
        self.topic_types: dict[str, str] = {}
        self.cli_overrides: dict[str, object] = {}

    def notify(self):
        with self.cond:
            self.cond.notify_all()

    def claim_topic(self, topic: str, msgtype: str) -> None:
        known = self.topic_types.get(topic)
        if known is not None and known != msgtype:
            raise TypeError(f"fake rclpy: topic {topic!r} already carries {known}, not {msgtype}")
        self.topic_types[topic] = msgtype


def _type_name(cls) -> str:
    name = getattr(cls, "_TYPE", None)
    if not isinstance(name, str):
        raise TypeError(f"{cls!r} is not a message class of the fake rclpy")
    return name


def _queue(qos) -> deque:
    return deque(maxlen=None if qos.history == HistoryPolicy.KEEP_ALL else max(qos.depth, 1))


class Publisher:
    def __init__(self, node, msg_type, topic: str, qos):
        self.node, self.msg_type, self.topic_name = node, msg_type, topic
        self.qos_profile = as_profile(qos)
        self.msgtype = _type_name(msg_type)
        self.history = _queue(self.qos_profile)
        self.published = 0
        self.destroyed = False

    def publish(self, msg) -> None:
        if not isinstance(msg, self.msg_type):
            raise TypeError(f"Expected {self.msg_type.__name__}, got {type(msg)}")
        if self.destroyed:
            raise RuntimeError(f"publisher on {self.topic_name} was destroyed")
        data = _messages.serialize(msg)
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


class Subscription:
    def __init__(self, node, msg_type, topic: str, callback, qos):
        self.node, self.msg_type, self.topic_name, self.callback = node, msg_type, topic, callback
        self.qos_profile = as_profile(qos)
        self.msgtype = _type_name(msg_type)
        self.queue = _queue(self.qos_profile)
        ctx = node.context
        if self.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL:
            with ctx.lock:
                for pub in ctx.publishers:
                    if pub.topic_name == topic and compatible(pub.qos_profile, self.qos_profile):
                        self.queue.extend(pub.history)

    def take(self):
        with self.node.context.lock:
            if not self.queue:
                return None
            data = self.queue.popleft()
        return _messages.deserialize(data, self.msgtype)


class Service:
    def __init__(self, node, srv_type, name: str, callback):
        self.node, self.srv_type, self.srv_name, self.callback = node, srv_type, name, callback
        self.requests: deque = deque()

    def handle_one(self) -> bool:
        with self.node.context.lock:
            if not self.requests:
                return False
            data, future = self.requests.popleft()
        req_t = self.srv_type.Request
        request = _messages.deserialize(data, req_t._TYPE)
        response = self.callback(request, self.srv_type.Response())
        if not isinstance(response, self.srv_type.Response):
            raise TypeError(f"service {self.srv_name} callback returned {type(response).__name__}, "
                            f"not {self.srv_type.Response.__name__}")
        future.set_result(_messages.deserialize(_messages.serialize(response), response._TYPE))
        return True


class Client:
    def __init__(self, node, srv_type, name: str):
        self.node, self.srv_type, self.srv_name = node, srv_type, name

    def service_is_ready(self) -> bool:
        return self.srv_name in self.node.context.services

    def wait_for_service(self, timeout_sec: float | None = None) -> bool:
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
                srv.requests.append((_messages.serialize(request), future))
                ctx.cond.notify_all()
        return future
