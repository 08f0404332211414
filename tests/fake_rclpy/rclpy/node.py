"""rclpy.node.Node: parameters with descriptors, publishers, subscriptions, timers, services,
clients, logging (also published on /rosout as rcl_interfaces/Log) and graph queries."""
from __future__ import annotations

import logging as _pylogging
import math
import time as _time

from rclpy import _graph
from rclpy.clock import Clock
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                              NotInitializedException, ParameterAlreadyDeclaredException,
                              ParameterNotDeclaredException)
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile

LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "fatal": 50}  # rcl_interfaces/Log
ROSOUT_QOS = QoSProfile(depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL)


class Timer:
    def __init__(self, node, period_sec: float, callback):
        if not (isinstance(period_sec, (int, float)) and period_sec > 0 and math.isfinite(period_sec)):
            raise ValueError(f"timer period must be a positive number of seconds, got {period_sec!r}")
        self.node, self.callback = node, callback
        self.timer_period_ns = int(period_sec * 1e9)
        self._period = float(period_sec)
        self.next_call = _time.monotonic() + self._period
        self._canceled = False

    def cancel(self):
        self._canceled = True

    def is_canceled(self):
        return self._canceled

    def reset(self):
        self._canceled = False
        self.next_call = _time.monotonic() + self._period

    def fire(self, now: float) -> None:
        self.next_call += self._period
        if self.next_call <= now:  # missed periods are skipped, as rcl timers do
            self.next_call = now + self._period
        self.callback()


class RcutilsLogger:
    def __init__(self, node, name: str):
        self.node, self.name = node, name
        self._py = _pylogging.getLogger(f"fake_rclpy.{name}")
        self._once: set = set()

    def _log(self, level: str, message, once: bool = False, **_kwargs) -> bool:
        text = str(message)
        if once:
            if text in self._once:
                return False
            self._once.add(text)
        self._py.log(LOG_LEVELS[level], text)
        self.node._rosout(LOG_LEVELS[level], text)
        return True

    def debug(self, message, **kw):
        return self._log("debug", message, **kw)

    def info(self, message, **kw):
        return self._log("info", message, **kw)

    def warning(self, message, **kw):
        return self._log("warning", message, **kw)

    warn = warning

    def error(self, message, **kw):
        return self._log("error", message, **kw)

    def fatal(self, message, **kw):
        return self._log("fatal", message, **kw)


class TopicEndpointInfo:
    def __init__(self, ep):
        self.node_name, self.topic_type, self.qos_profile = ep.node.get_name(), _to_ros_type(ep.msgtype), ep.qos_profile


def _to_ros_type(msgtype: str) -> str:
    return msgtype


def _range_problem(value, descriptor) -> str | None:
    if descriptor is None:
        return None
    for r in descriptor.floating_point_range:
        if isinstance(value, (int, float)) and not (r.from_value - 1e-9 <= value <= r.to_value + 1e-9):
            return f"not in range [{r.from_value}, {r.to_value}]"
    for r in descriptor.integer_range:
        if isinstance(value, int) and not (r.from_value <= value <= r.to_value):
            return f"not in range [{r.from_value}, {r.to_value}]"
    return None


class Node:
    def __init__(self, node_name: str, *, context=None, cli_args=None, namespace=None,
                 use_global_arguments=True, enable_rosout=True, start_parameter_services=True,
                 parameter_overrides=None, allow_undeclared_parameters=False,
                 automatically_declare_parameters_from_overrides=False):
        import rclpy

        self.context = context or rclpy.get_default_context()
        if not self.context.ok:
            raise NotInitializedException("cannot create node")
        if not node_name or not node_name.replace("_", "a").isalnum():
            raise ValueError(f"Invalid node name: {node_name!r}")
        self._name, self._namespace = node_name, namespace or "/"
        self._overrides = dict(self.context.cli_overrides)
        for p in parameter_overrides or []:
            self._overrides[p.name] = p
        self._parameters: dict[str, Parameter] = {}
        self._descriptors: dict = {}
        self._set_callbacks = []
        self._timers, self._publishers, self._subscriptions = [], [], []
        self._services, self._clients = [], []
        self._clock = Clock()
        self._logger = RcutilsLogger(self, node_name)
        self._rosout_pub = None
        self._destroyed = False
        self._executor = None
        if enable_rosout:
            from rcl_interfaces.msg import Log

            self._rosout_pub = self.create_publisher(Log, "/rosout", ROSOUT_QOS)

    @property
    def executor(self):
        """The executor spinning this node (set by Executor.add_node, as in rclpy)."""
        return self._executor

    @executor.setter
    def executor(self, new_executor):
        self._executor = new_executor

    # read-only in rclpy too: a node subclass assigning these fails on real ROS, so it fails here
    publishers = property(lambda self: iter(self._publishers))
    subscriptions = property(lambda self: iter(self._subscriptions))
    timers = property(lambda self: iter(self._timers))
    services = property(lambda self: iter(self._services))
    clients = property(lambda self: iter(self._clients))

    # --- identity, clock, logging ---
    def get_name(self) -> str:
        return self._name

    def get_namespace(self) -> str:
        return self._namespace

    def get_clock(self) -> Clock:
        return self._clock

    def get_logger(self) -> RcutilsLogger:
        return self._logger

    def _rosout(self, level: int, text: str) -> None:
        if self._rosout_pub is None or self._destroyed:
            return
        from rcl_interfaces.msg import Log

        self._rosout_pub.publish(Log(stamp=self._clock.now().to_msg(), level=level, name=self._name,
                                     msg=text, file="", function="", line=0))

    def resolve_name(self, name: str) -> str:
        if name.startswith("~"):
            base = self._namespace.rstrip("/") + "/" + self._name
            return base + name[1:]
        return name if name.startswith("/") else self._namespace.rstrip("/") + "/" + name

    # --- parameters ---
    def declare_parameter(self, name: str, value=None, descriptor=None, ignore_override=False):
        from rcl_interfaces.msg import ParameterDescriptor

        if name in self._parameters:
            raise ParameterAlreadyDeclaredException(name)
        descriptor = descriptor or ParameterDescriptor()
        if isinstance(value, Parameter.Type):
            ptype, value = value, None
        else:
            ptype = Parameter.Type.from_parameter_value(value)
        param = Parameter(name, ptype, value)
        if name in self._overrides and not ignore_override:
            given = self._overrides[name]
            param = given if isinstance(given, Parameter) else Parameter(name, value=given)
            if ptype != Parameter.Type.NOT_SET and param.type_ != ptype and not descriptor.dynamic_typing:
                raise InvalidParameterTypeException(param, ptype.name)
        problem = _range_problem(param.value, descriptor)
        if problem:
            raise InvalidParameterValueException(name, param.value, problem)
        descriptor.name = name
        descriptor.type = int(ptype)
        for cb in self._set_callbacks:
            result = cb([param])
            if not result.successful:
                raise InvalidParameterValueException(name, param.value, result.reason)
        self._parameters[name], self._descriptors[name] = param, descriptor
        return param

    def declare_parameters(self, namespace: str, parameters):
        out = []
        for item in parameters:
            name = f"{namespace}.{item[0]}" if namespace else item[0]
            out.append(self.declare_parameter(name, *item[1:]))
        return out

    def has_parameter(self, name: str) -> bool:
        return name in self._parameters

    def get_parameter(self, name: str) -> Parameter:
        if name not in self._parameters:
            raise ParameterNotDeclaredException(name)
        return self._parameters[name]

    def get_parameters(self, names):
        return [self.get_parameter(n) for n in names]

    def describe_parameter(self, name: str):
        if name not in self._descriptors:
            raise ParameterNotDeclaredException(name)
        return self._descriptors[name]

    def add_on_set_parameters_callback(self, callback):
        self._set_callbacks.append(callback)

    def set_parameters(self, parameters):
        from rcl_interfaces.msg import SetParametersResult

        results = []
        for p in parameters:
            if p.name not in self._parameters:
                raise ParameterNotDeclaredException(p.name)
            d = self._descriptors[p.name]
            old = self._parameters[p.name]
            if d.read_only:
                results.append(SetParametersResult(successful=False, reason=f"Trying to set a read-only parameter: {p.name}"))
                continue
            if old.type_ != Parameter.Type.NOT_SET and p.type_ != old.type_ and not d.dynamic_typing:
                raise InvalidParameterTypeException(p, old.type_.name)
            problem = _range_problem(p.value, d)
            if problem:
                results.append(SetParametersResult(successful=False, reason=problem))
                continue
            result = SetParametersResult(successful=True)
            for cb in self._set_callbacks:
                result = cb([p])
                if not result.successful:
                    break
            if result.successful:
                self._parameters[p.name] = p
            results.append(result)
        return results

    # --- entities ---
    def _add(self, collection, entity, topic=None):
        ctx = self.context
        with ctx.lock:
            if topic is not None:
                ctx.claim_topic(topic, entity.msgtype)
            collection.append(entity)
        return entity

    def create_publisher(self, msg_type, topic: str, qos_profile, **_kw):
        topic = self.resolve_name(topic)
        pub = _graph.Publisher(self, msg_type, topic, qos_profile)
        self._publishers.append(pub)
        return self._add(self.context.publishers, pub, topic)

    def create_subscription(self, msg_type, topic: str, callback, qos_profile, **_kw):
        topic = self.resolve_name(topic)
        sub = _graph.Subscription(self, msg_type, topic, callback, qos_profile)
        self._subscriptions.append(sub)
        return self._add(self.context.subscriptions, sub, topic)

    def create_timer(self, timer_period_sec: float, callback, callback_group=None, clock=None):
        timer = Timer(self, timer_period_sec, callback)
        self._timers.append(timer)
        self.context.notify()
        return timer

    def create_service(self, srv_type, srv_name: str, callback, **_kw):
        name = self.resolve_name(srv_name)
        with self.context.lock:
            if name in self.context.services:
                raise RuntimeError(f"fake rclpy: service {name!r} already exists")
            srv = _graph.Service(self, srv_type, name, callback)
            self.context.services[name] = srv
        self._services.append(srv)
        return srv

    def create_client(self, srv_type, srv_name: str, **_kw):
        client = _graph.Client(self, srv_type, self.resolve_name(srv_name))
        self._clients.append(client)
        return client

    def destroy_timer(self, timer) -> bool:
        timer.cancel()
        if timer in self._timers:
            self._timers.remove(timer)
        return True

    def destroy_publisher(self, pub) -> bool:
        with self.context.lock:
            pub.destroyed = True
            if pub in self.context.publishers:
                self.context.publishers.remove(pub)
        return True

    def destroy_subscription(self, sub) -> bool:
        with self.context.lock:
            if sub in self.context.subscriptions:
                self.context.subscriptions.remove(sub)
        return True

    def destroy_service(self, srv) -> bool:
        with self.context.lock:
            self.context.services.pop(srv.srv_name, None)
        return True

    def destroy_node(self) -> None:
        for t in list(self._timers):
            self.destroy_timer(t)
        for s in list(self._subscriptions):
            self.destroy_subscription(s)
        for s in list(self._services):
            self.destroy_service(s)
        self._destroyed = True
        for p in list(self._publishers):
            self.destroy_publisher(p)

    # --- graph ---
    def get_topic_names_and_types(self):
        with self.context.lock:
            names = {e.topic_name for e in self.context.publishers + self.context.subscriptions}
            return sorted((n, [self.context.topic_types[n]]) for n in names)

    def get_publishers_info_by_topic(self, topic_name: str):
        with self.context.lock:
            return [TopicEndpointInfo(p) for p in self.context.publishers if p.topic_name == topic_name]

    def get_subscriptions_info_by_topic(self, topic_name: str):
        with self.context.lock:
            return [TopicEndpointInfo(s) for s in self.context.subscriptions if s.topic_name == topic_name]

    def count_publishers(self, topic_name: str) -> int:
        return len(self.get_publishers_info_by_topic(topic_name))

    def count_subscribers(self, topic_name: str) -> int:
        return len(self.get_subscriptions_info_by_topic(topic_name))

    def get_service_names_and_types(self):
        with self.context.lock:
            return sorted((n, [s.srv_type._TYPE]) for n, s in self.context.services.items())

    # --- used by the executor ---
    def _ready_work(self, now: float):
        """One ready callback as a zero-argument callable, or None; plus the next timer due."""
        due = None
        for t in list(self._timers):
            if t.is_canceled():
                continue
            if t.next_call <= now:
                return (lambda t=t: t.fire(_time.monotonic())), now
            due = t.next_call if due is None else min(due, t.next_call)
        for s in list(self._subscriptions):
            if s.queue:
                def run(s=s):
                    msg = s.take()
                    if msg is not None:
                        s.callback(msg)
                return run, due
        for srv in list(self._services):
            if srv.requests:
                return srv.handle_one, due
        return None, due
