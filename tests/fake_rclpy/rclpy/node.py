"""rclpy.node.Node: names and remapping, parameters with rclpy's declare/set rules, parameter
overrides from the command line and parameter files, publishers, subscriptions, timers,
services and clients in callback groups, logging (also on /rosout) and graph queries.

Parameters follow rclpy/node.py (Humble and Jazzy): a declared parameter's type is its
default's; an override (parameter_overrides=, `-p`, `--params-file`) of another type raises
InvalidParameterTypeException, with no conversion (an int for a double parameter is refused);
integer_range applies to INTEGER values only, floating_point_range to DOUBLE values only (the
first range of the descriptor); bounds are inclusive, a double is at a bound when
math.isclose(value, bound, rel_tol=1e-6) (no absolute tolerance), and a non-zero step must be
met (exactly for integers, within rel_tol for doubles); set_parameters returns unsuccessful
results for a read-only parameter, a wrong type or a range violation, and raises
ParameterNotDeclaredException for an undeclared one. Every node declares `use_sim_time`
(bool) as rclpy's TimeSource does, and publishes a ParameterEvent on /parameter_events for
each declared or set parameter.
"""
from __future__ import annotations

import math
import re
import time as _time
import warnings
import weakref

from rclpy import _arguments, _graph
from rclpy._rclpy_pybind11 import RCLInvalidROSArgsError, UnknownROSArgsError
from rclpy.callback_groups import CallbackGroup, MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ROSClock
from rclpy.exceptions import (InvalidNamespaceException, InvalidNodeNameException, InvalidParameterException,
                              InvalidParameterTypeException, InvalidParameterValueException,
                              InvalidServiceNameException, InvalidTopicNameException, NotInitializedException,
                              ParameterAlreadyDeclaredException, ParameterImmutableException,
                              ParameterNotDeclaredException, ParameterUninitializedException)
from rclpy.logging import get_logger
from rclpy.parameter import PARAMETER_SEPARATOR_STRING, Parameter
from rclpy.qos import (DurabilityPolicy, QoSProfile, qos_profile_parameter_events, qos_profile_services_default,
                       validate_qos_or_depth)

ROSOUT_QOS = QoSProfile(depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL)
USE_SIM_TIME_NAME = "use_sim_time"
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Timer:
    """A node timer (rcl semantics: the first call one period after creation; after missed
    periods the next call stays on the period grid)."""

    def __init__(self, callback, callback_group, timer_period_ns: int, clock, *, context):
        self.callback, self.callback_group, self.timer_period_ns = callback, callback_group, timer_period_ns
        self._clock, self._context = clock, context
        self._period = timer_period_ns * 1e-9
        self._next = _time.monotonic() + self._period
        self._last = _time.monotonic()
        self._canceled = False
        self._executor_event = False
        self.destroyed = False

    @property
    def clock(self):
        return self._clock

    @property
    def timer_period_ns(self) -> int:
        return self._timer_period_ns

    @timer_period_ns.setter
    def timer_period_ns(self, value: int) -> None:
        self._timer_period_ns = value
        self._period = value * 1e-9
        self._next = _time.monotonic() + self._period

    def cancel(self) -> None:
        self._canceled = True

    def is_canceled(self) -> bool:
        return self._canceled

    def reset(self) -> None:
        self._canceled = False
        self._next = _time.monotonic() + self._period
        self._context.notify()

    def is_ready(self) -> bool:
        return self._ready(_time.monotonic())

    def time_until_next_call(self):
        return None if self._canceled else int((self._next - _time.monotonic()) * 1e9)

    def time_since_last_call(self) -> int:
        return int((_time.monotonic() - self._last) * 1e9)

    def destroy(self) -> None:
        self.destroyed = True

    # --- executor interface ---
    def _due(self):
        return None if self._canceled or self.destroyed else self._next

    def _ready(self, now: float) -> bool:
        return not self._canceled and not self.destroyed and self._next <= now

    def _take(self):
        now = _time.monotonic()
        self._last = now
        if self._period <= 0:
            self._next = now
        else:
            self._next += self._period
            if self._next <= now:
                self._next += self._period * (math.floor((now - self._next) / self._period) + 1)
        return True

    def _execute(self, _arg) -> None:
        self.callback()


class TopicEndpointInfo:
    def __init__(self, ep):
        self.node_name, self.node_namespace = ep.node.get_name(), ep.node.get_namespace()
        self.topic_type, self.qos_profile = ep.msgtype, ep.qos_profile


def _validate_node_name(name) -> None:
    if not isinstance(name, str):
        raise TypeError("node name must be a str")
    if not name:
        raise InvalidNodeNameException(name, "node name must not be empty", 0)
    bad = next((i for i, c in enumerate(name) if not (c.isascii() and (c.isalnum() or c == "_"))), None)
    if bad is not None:
        raise InvalidNodeNameException(name, "node name must not contain characters other than alphanumerics or '_'",
                                       bad)
    if name[0].isdigit():
        raise InvalidNodeNameException(name, "node name must not start with a number", 0)
    if len(name) > 255:
        raise InvalidNodeNameException(name, "node name should not exceed 255 characters", 254)


def _normalize_namespace(ns) -> str:
    ns = ns or "/"
    if not ns.startswith("/"):
        ns = "/" + ns
    if ns != "/":
        if ns.endswith("/"):
            raise InvalidNamespaceException(ns, "namespace must not end with a forward slash", len(ns) - 1)
        for tok in ns[1:].split("/"):
            if not _TOKEN.fullmatch(tok):
                raise InvalidNamespaceException(ns, "namespace must contain only alphanumerics, '_' or '/', "
                                                "with tokens that do not start with a number", ns.find(tok))
    return ns


def _expand(name: str, node_name: str, ns: str, kind: str) -> str:
    """rcl_expand_topic_name + validation: '~' is the node's private namespace, '{node}' and
    '{ns}' substitutions, relative names go under the namespace."""
    exc = InvalidServiceNameException if kind == "service" else InvalidTopicNameException
    if not isinstance(name, str) or not name:
        raise exc(str(name), f"{kind} name must not be empty", 0)
    base = ns.rstrip("/")
    out = name.replace("{node}", node_name).replace("{ns}", ns).replace("{namespace}", ns)
    if out.startswith("~"):
        if len(out) > 1 and out[1] != "/":
            raise exc(name, "'~' must be followed by '/' if it exists", 1)
        out = base + "/" + node_name + out[1:]
    elif not out.startswith("/"):
        out = base + "/" + out
    if out != "/" and out.endswith("/"):
        raise exc(name, f"{kind} name must not end with a forward slash", len(name) - 1)
    for tok in out[1:].split("/"):
        if not _TOKEN.fullmatch(tok):
            raise exc(name, f"{kind} name must contain only alphanumerics, '_', '~', '{{', '}}' or '/', "
                      "with tokens that do not start with a number", max(name.find(tok), 0))
    return out


class Node:
    PARAM_REL_TOL = 1e-6

    def __init__(self, node_name: str, *, context=None, cli_args=None, namespace=None,
                 use_global_arguments: bool = True, enable_rosout: bool = True,
                 start_parameter_services: bool = True, parameter_overrides=None,
                 allow_undeclared_parameters: bool = False,
                 automatically_declare_parameters_from_overrides: bool = False):
        import rclpy

        self._context = rclpy.get_default_context() if context is None else context
        self._parameters: dict = {}
        self._descriptors: dict = {}
        self._publishers, self._subscriptions, self._timers = [], [], []
        self._services, self._clients = [], []
        self._default_callback_group = MutuallyExclusiveCallbackGroup()
        self._parameters_callbacks: list = []
        self._allow_undeclared_parameters = allow_undeclared_parameters
        self._destroyed = False
        self.__executor_weakref = None
        if not self._context.ok():
            raise NotInitializedException("cannot create node")
        try:
            local = _arguments.parse(cli_args or [])
        except _arguments.ArgumentError as e:
            raise RCLInvalidROSArgsError(f"Failed to parse ROS arguments: {e}") from None
        if local.unknown_ros:
            raise UnknownROSArgsError(repr(local.unknown_ros))
        _validate_node_name(node_name)
        namespace = _normalize_namespace(namespace)
        sources = [self._context.global_arguments] if use_global_arguments else []
        sources.append(local)
        rules = [r for args in reversed(sources) for r in args.remaps]  # the node's own rules first
        for prefix, src, dst in rules:
            if prefix in (None, node_name) and src in ("__node", "__name"):
                _validate_node_name(dst)
                node_name = dst
                break
        for prefix, src, dst in rules:
            if prefix in (None, node_name) and src == "__ns":
                namespace = _normalize_namespace(dst)
                break
        self._name, self._namespace = node_name, namespace
        self._remaps = [r for r in rules if r[1] not in ("__node", "__name", "__ns")]
        self._fqn = ("" if namespace == "/" else namespace) + "/" + node_name
        self._logger_name = (namespace.strip("/").replace("/", ".") + "." if namespace != "/" else "") + node_name
        self._logger = get_logger(self._logger_name)
        self._rosout_pub = None
        if enable_rosout:
            from rcl_interfaces.msg import Log

            self._rosout_pub = self.create_publisher(Log, "/rosout", ROSOUT_QOS)
            _graph.register_rosout(self._logger_name, self)
        from rcl_interfaces.msg import ParameterEvent

        self._parameter_event_publisher = self.create_publisher(ParameterEvent, "/parameter_events",
                                                                qos_profile_parameter_events)
        self._parameter_overrides = _arguments.params_for(self._fqn, sources)
        if parameter_overrides is not None:
            self._parameter_overrides.update({p.name: p for p in parameter_overrides})
        self._clock = ROSClock()
        if automatically_declare_parameters_from_overrides:
            from rcl_interfaces.msg import ParameterDescriptor

            self.declare_parameters("", [(name, p.value, ParameterDescriptor())
                                         for name, p in self._parameter_overrides.items()], ignore_override=True)
        # rclpy's TimeSource: every node has use_sim_time (bool); the fake has no /clock
        if not self.has_parameter(USE_SIM_TIME_NAME):
            self.declare_parameter(USE_SIM_TIME_NAME, False)
        self.add_on_set_parameters_callback(self._on_use_sim_time)

    # --- executor ---
    @property
    def executor(self):
        return self.__executor_weakref() if self.__executor_weakref else None

    @executor.setter
    def executor(self, new_executor) -> None:
        current = self.executor
        if current == new_executor:
            return
        if current is not None:
            current.remove_node(self)
        if new_executor is None:
            self.__executor_weakref = None
        else:
            new_executor.add_node(self)
            self.__executor_weakref = weakref.ref(new_executor)

    def _wake_executor(self) -> None:
        self._context.notify()

    @property
    def context(self):
        return self._context

    @property
    def default_callback_group(self) -> CallbackGroup:
        return self._default_callback_group

    publishers = property(lambda self: iter(list(self._publishers)))
    subscriptions = property(lambda self: iter(list(self._subscriptions)))
    timers = property(lambda self: iter(list(self._timers)))
    services = property(lambda self: iter(list(self._services)))
    clients = property(lambda self: iter(list(self._clients)))
    guards = property(lambda self: iter(()))
    waitables = property(lambda self: iter(()))

    # --- identity, clock, logging ---
    def get_name(self) -> str:
        return self._name

    def get_namespace(self) -> str:
        return self._namespace

    def get_fully_qualified_name(self) -> str:
        return self._fqn

    def get_clock(self) -> Clock:
        return self._clock

    def get_logger(self):
        return self._logger

    def _rosout(self, level: int, name: str, text: str, function: str, file: str, line: int) -> None:
        if self._rosout_pub is None or self._destroyed:
            return
        from rcl_interfaces.msg import Log

        self._rosout_pub.publish(Log(stamp=self._clock.now().to_msg(), level=level, name=name, msg=text,
                                     file=file, function=function, line=max(0, min(line, 2**32 - 1))))

    def resolve_name(self, name: str, kind: str = "topic") -> str:
        """The expanded, remapped name (rcl: the node's own remap rules first, first match wins)."""
        full = _expand(name, self._name, self._namespace, kind)
        for _prefix, src, dst in self._remaps:
            try:
                if _expand(src, self._name, self._namespace, kind) == full:
                    return _expand(dst, self._name, self._namespace, kind)
            except (InvalidTopicNameException, InvalidServiceNameException):
                continue
        return full

    # --- parameters ---
    def declare_parameter(self, name: str, value=None, descriptor=None, ignore_override: bool = False) -> Parameter:
        from rcl_interfaces.msg import ParameterDescriptor

        if value is None and descriptor is None:
            args = (name,)
        else:
            args = (name, value, ParameterDescriptor() if descriptor is None else descriptor)
        return self.declare_parameters("", [args], ignore_override)[0]

    def declare_parameters(self, namespace: str, parameters, ignore_override: bool = False):
        from rcl_interfaces.msg import ParameterDescriptor, ParameterValue

        parameter_list, descriptors = [], {}
        for index, item in enumerate(parameters):
            if len(item) < 1 or len(item) > 3:
                raise TypeError(f"Invalid parameter tuple length at index {index} in parameters list: {item}; "
                                "expecting length between 1 and 3")
            name = item[0]
            if not isinstance(name, str):
                raise TypeError(f"First element {name} at index {index} in parameters list is not a str.")
            if namespace:
                name = f"{namespace}.{name}"
            _validate_parameter_name(name)
            second = item[1] if len(item) > 1 else None
            descriptor = item[2] if len(item) > 2 else ParameterDescriptor()
            if not isinstance(descriptor, ParameterDescriptor):
                raise TypeError(f"Third element {descriptor} at index {index} in parameters list "
                                "is not a ParameterDescriptor.")
            value = None
            if len(item) == 1:
                warnings.warn(f"when declaring parameter named '{name}', declaring a parameter only providing "
                              "its name is deprecated.")
                descriptor.dynamic_typing = True
            if isinstance(second, Parameter.Type):
                if second == Parameter.Type.NOT_SET:
                    raise ValueError(f"Cannot declare parameter {{{name}}} as statically typed of type NOT_SET")
                if descriptor.dynamic_typing is True:
                    raise ValueError(f"When declaring parameter {{{name}}} passing a descriptor with"
                                     "`dynamic_typing=True` is not allowed when the parameter type is provided")
                descriptor.type = second.value
            else:
                value = second
                if not descriptor.dynamic_typing:
                    descriptor.type = (value.type if isinstance(value, ParameterValue)
                                       else Parameter.Type.from_parameter_value(value).value)
                    # Jazzy refuses a static parameter without a default (Humble declares it with
                    # type NOT_SET and then refuses every override): the fake refuses it at once
                    if descriptor.type == 0:
                        raise ValueError("Cannot declare a statically typed parameter with default value "
                                         "of type PARAMETER_NOT_SET")
            if not ignore_override and name in self._parameter_overrides:
                value = self._parameter_overrides[name].value
            parameter_list.append(Parameter(name, value=value))
            descriptors[name] = descriptor
        already = [p.name for p in parameter_list if p.name in self._parameters]
        if already:
            raise ParameterAlreadyDeclaredException(already)
        for param in parameter_list:
            result = self._set_parameters_atomically([param], descriptors, allow_not_set_type=True)
            if not result.successful:
                if result.reason.startswith("Wrong parameter type"):
                    raise InvalidParameterTypeException(param, Parameter.Type(descriptors[param.name].type).name)
                raise InvalidParameterValueException(param.name, param.value, result.reason)
        return [self._parameters[p.name] for p in parameter_list]

    def undeclare_parameter(self, name: str) -> None:
        if not self.has_parameter(name):
            raise ParameterNotDeclaredException(name)
        if self._descriptors[name].read_only:
            raise ParameterImmutableException(name)
        del self._parameters[name]
        del self._descriptors[name]

    def has_parameter(self, name: str) -> bool:
        return name in self._parameters

    def get_parameter_types(self, names):
        return [self.get_parameter_type(n) for n in names]

    def get_parameter_type(self, name: str):
        if self.has_parameter(name):
            return self._parameters[name].type_.value
        if self._allow_undeclared_parameters:
            return Parameter.Type.NOT_SET
        raise ParameterNotDeclaredException(name)

    def get_parameters(self, names):
        if not all(isinstance(n, str) for n in names):
            raise TypeError("All names must be instances of type str")
        return [self.get_parameter(n) for n in names]

    def get_parameter(self, name: str) -> Parameter:
        if self.has_parameter(name):
            p = self._parameters[name]
            if p.type_ != Parameter.Type.NOT_SET or self._descriptors[name].dynamic_typing:
                return p
            raise ParameterUninitializedException(name)
        if self._allow_undeclared_parameters:
            return Parameter(name, Parameter.Type.NOT_SET, None)
        raise ParameterNotDeclaredException(name)

    def get_parameter_or(self, name: str, alternative_value=None) -> Parameter:
        if alternative_value is None:
            alternative_value = Parameter(name, Parameter.Type.NOT_SET)
        if not self.has_parameter(name) or self._parameters[name].type_ == Parameter.Type.NOT_SET:
            return alternative_value
        return self._parameters[name]

    def get_parameters_by_prefix(self, prefix: str) -> dict:
        if prefix:
            prefix = prefix + PARAMETER_SEPARATOR_STRING
        return {n[len(prefix):]: p for n, p in self._parameters.items() if n.startswith(prefix)}

    def describe_parameter(self, name: str):
        from rcl_interfaces.msg import ParameterDescriptor

        try:
            return self._descriptors[name]
        except KeyError:
            if self._allow_undeclared_parameters:
                return ParameterDescriptor()
            raise ParameterNotDeclaredException(name) from None

    def describe_parameters(self, names):
        return [self.describe_parameter(n) for n in names]

    def add_on_set_parameters_callback(self, callback) -> None:
        self._parameters_callbacks.insert(0, callback)

    def remove_on_set_parameters_callback(self, callback) -> None:
        self._parameters_callbacks.remove(callback)

    def set_parameters(self, parameter_list):
        results = []
        for param in parameter_list:
            self._check_undeclared_parameters([param])
            results.append(self._set_parameters_atomically([param]))
        return results

    def set_parameters_atomically(self, parameter_list):
        self._check_undeclared_parameters(parameter_list)
        return self._set_parameters_atomically(parameter_list)

    def _check_undeclared_parameters(self, parameter_list) -> None:
        if not all(isinstance(p, Parameter) for p in parameter_list):
            raise TypeError("parameter must be instance of type '{}'".format(repr(Parameter)))
        undeclared = [p.name for p in parameter_list if p.name not in self._parameters]
        if undeclared and not self._allow_undeclared_parameters:
            raise ParameterNotDeclaredException(undeclared)

    def _set_parameters_atomically(self, parameter_list, descriptors=None, allow_not_set_type: bool = False):
        from rcl_interfaces.msg import ParameterDescriptor, ParameterEvent, SetParametersResult

        use = self._descriptors if descriptors is None else descriptors
        for param in parameter_list:
            if param.name in use:
                result = self._apply_descriptor(param, use[param.name], check_read_only=descriptors is None)
                if not result.successful:
                    return result
        for callback in list(self._parameters_callbacks):
            result = callback(parameter_list)
            if not result.successful:
                return result
        event = ParameterEvent(node=self._fqn)
        new, changed, deleted = [], [], []
        for param in parameter_list:
            if not allow_not_set_type and param.type_ == Parameter.Type.NOT_SET:
                deleted.append(param.to_parameter_msg())
                self._parameters.pop(param.name, None)
                self._descriptors.pop(param.name, None)
                continue
            if descriptors is not None:
                self._descriptors[param.name] = descriptors[param.name]
            elif param.name not in self._descriptors:
                self._descriptors[param.name] = ParameterDescriptor(dynamic_typing=True)
            (new if self.get_parameter_or(param.name).type_ == Parameter.Type.NOT_SET else changed).append(
                param.to_parameter_msg())
            self._parameters[param.name] = param
        event.new_parameters, event.changed_parameters, event.deleted_parameters = new, changed, deleted
        event.stamp = self._clock.now().to_msg()
        if not self._destroyed:
            self._parameter_event_publisher.publish(event)
        return SetParametersResult(successful=True)

    def _apply_descriptor(self, parameter, descriptor=None, check_read_only: bool = True):
        from rcl_interfaces.msg import SetParametersResult

        if descriptor is None:
            descriptor = self.describe_parameter(parameter.name)
        else:
            descriptor.name = parameter.name
        if check_read_only and descriptor.read_only:
            return SetParametersResult(successful=False,
                                       reason=f"Trying to set a read-only parameter: {parameter.name}.")
        if descriptor.dynamic_typing:
            descriptor.type = parameter.type_.value
        elif self.has_parameter(parameter.name) and parameter.type_ == Parameter.Type.NOT_SET:
            return SetParametersResult(successful=False, reason="Static parameter cannot be undeclared")
        elif parameter.type_ != Parameter.Type.NOT_SET and parameter.type_.value != descriptor.type:
            return SetParametersResult(successful=False, reason=(
                f"Wrong parameter type, expected '{Parameter.Type(descriptor.type)}' got '{parameter.type_}'"))
        if parameter.type_ == Parameter.Type.INTEGER and descriptor.integer_range:
            return self._apply_integer_range(parameter, descriptor.integer_range[0])
        if parameter.type_ == Parameter.Type.DOUBLE and descriptor.floating_point_range:
            return self._apply_floating_point_range(parameter, descriptor.floating_point_range[0])
        return SetParametersResult(successful=True)

    def _apply_integer_range(self, parameter, integer_range):
        from rcl_interfaces.msg import SetParametersResult

        lo = min(integer_range.from_value, integer_range.to_value)
        hi = max(integer_range.from_value, integer_range.to_value)
        v = parameter.value
        if v == lo or v == hi:
            return SetParametersResult(successful=True)
        if not lo < v < hi:
            return SetParametersResult(successful=False, reason=(
                f"Parameter {parameter.name} out of range. Min: {lo}, Max: {hi}, value: {v}"))
        if integer_range.step != 0 and (v - lo) % integer_range.step != 0:
            return SetParametersResult(successful=False, reason=(
                f"The parameter value for {parameter.name} is not a valid step. "
                f"Min: {lo}, max: {hi}, value: {v}, step: {integer_range.step}"))
        return SetParametersResult(successful=True)

    def _apply_floating_point_range(self, parameter, fp_range):
        from rcl_interfaces.msg import SetParametersResult

        lo = min(fp_range.from_value, fp_range.to_value)
        hi = max(fp_range.from_value, fp_range.to_value)
        v, tol = parameter.value, self.PARAM_REL_TOL
        if math.isclose(v, lo, rel_tol=tol) or math.isclose(v, hi, rel_tol=tol):
            return SetParametersResult(successful=True)
        if not lo < v < hi:
            return SetParametersResult(successful=False, reason=(
                f"Parameter {parameter.name} out of range Min: {lo}, Max: {hi}, value: {v}"))
        if fp_range.step != 0.0:
            steps = round((v - lo) / fp_range.step)
            if not math.isclose(lo + steps * fp_range.step, v, rel_tol=tol):
                return SetParametersResult(successful=False, reason=(
                    f"The parameter value for {parameter.name} is not close enough to a valid step. "
                    f"Min: {lo}, max: {hi}, value: {v}, step: {fp_range.step}"))
        return SetParametersResult(successful=True)

    def _on_use_sim_time(self, parameter_list):
        from rcl_interfaces.msg import SetParametersResult

        for p in parameter_list:
            if p.name == USE_SIM_TIME_NAME:
                if p.type_ != Parameter.Type.BOOL:
                    self.get_logger().error(f"{USE_SIM_TIME_NAME} parameter set to something besides a bool")
                break
        return SetParametersResult(successful=True)

    # --- entities ---
    def _group(self, callback_group):
        group = self._default_callback_group if callback_group is None else callback_group
        if not isinstance(group, CallbackGroup):
            raise TypeError(f"callback_group must be a CallbackGroup, got {type(group).__name__}")
        return group

    def _check_alive(self) -> None:
        if self._destroyed:
            from rclpy._rclpy_pybind11 import InvalidHandle
            raise InvalidHandle("cannot use Destroyable because destruction was requested")

    def create_publisher(self, msg_type, topic: str, qos_profile, *, callback_group=None, event_callbacks=None,
                         qos_overriding_options=None, publisher_class=None):
        self._check_alive()
        qos = validate_qos_or_depth(qos_profile)
        self._group(callback_group)
        name = self.resolve_name(topic)
        pub = _graph.Publisher(self, msg_type, name, qos)
        self._publishers.append(pub)
        self._context.add_endpoint(pub)
        return pub

    def create_subscription(self, msg_type, topic: str, callback, qos_profile, *, callback_group=None,
                            event_callbacks=None, qos_overriding_options=None, raw: bool = False):
        self._check_alive()
        qos = validate_qos_or_depth(qos_profile)
        group = self._group(callback_group)
        name = self.resolve_name(topic)
        sub = _graph.Subscription(self, msg_type, name, callback, qos, group, raw)
        group.add_entity(sub)
        self._subscriptions.append(sub)
        self._context.add_endpoint(sub)
        return sub

    def create_timer(self, timer_period_sec: float, callback, callback_group=None, clock=None):
        self._check_alive()
        if not (isinstance(timer_period_sec, (int, float)) and math.isfinite(timer_period_sec)
                and timer_period_sec > 0):
            raise ValueError(f"timer period must be a positive number of seconds, got {timer_period_sec!r}")
        group = self._group(callback_group)
        timer = Timer(callback, group, int(float(timer_period_sec) * 1e9), clock or self._clock,
                      context=self._context)
        group.add_entity(timer)
        self._timers.append(timer)
        self._context.notify()
        return timer

    def create_service(self, srv_type, srv_name: str, callback, *, qos_profile=qos_profile_services_default,
                       callback_group=None):
        self._check_alive()
        group = self._group(callback_group)
        name = self.resolve_name(srv_name, "service")
        srv = _graph.Service(self, srv_type, name, callback, qos_profile, group)
        self._context.add_service(srv)
        group.add_entity(srv)
        self._services.append(srv)
        return srv

    def create_client(self, srv_type, srv_name: str, *, qos_profile=qos_profile_services_default,
                      callback_group=None):
        self._check_alive()
        group = self._group(callback_group)
        client = _graph.Client(self, srv_type, self.resolve_name(srv_name, "service"), qos_profile, group)
        group.add_entity(client)
        self._clients.append(client)
        return client

    def destroy_timer(self, timer) -> bool:
        if timer in self._timers:
            self._timers.remove(timer)
            timer.destroy()
            self._context.notify()
            return True
        return False

    def destroy_publisher(self, publisher) -> bool:
        if publisher in self._publishers:
            self._publishers.remove(publisher)
            self._context.remove_endpoint(publisher)
            publisher.destroyed = True
            return True
        return False

    def destroy_subscription(self, subscription) -> bool:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
            self._context.remove_endpoint(subscription)
            subscription.destroyed = True
            self._context.notify()
            return True
        return False

    def destroy_service(self, service) -> bool:
        if service in self._services:
            self._services.remove(service)
            self._context.remove_service(service)
            service.destroyed = True
            return True
        return False

    def destroy_client(self, client) -> bool:
        if client in self._clients:
            self._clients.remove(client)
            client.destroyed = True
            return True
        return False

    def destroy_node(self):
        for t in list(self._timers):
            self.destroy_timer(t)
        for s in list(self._subscriptions):
            self.destroy_subscription(s)
        for s in list(self._services):
            self.destroy_service(s)
        for c in list(self._clients):
            self.destroy_client(c)
        self._destroyed = True
        _graph.unregister_rosout(self._logger_name, self)
        for p in list(self._publishers):
            self.destroy_publisher(p)

    # --- graph ---
    def get_topic_names_and_types(self, no_demangle: bool = False):
        ctx = self._context
        with ctx.lock:
            names = {e.topic_name for e in ctx.publishers + ctx.subscriptions}
            return sorted((n, [ctx.topic_types[n]]) for n in names)

    def get_publishers_info_by_topic(self, topic_name: str, no_mangle: bool = False):
        with self._context.lock:
            return [TopicEndpointInfo(p) for p in self._context.publishers if p.topic_name == topic_name]

    def get_subscriptions_info_by_topic(self, topic_name: str, no_mangle: bool = False):
        with self._context.lock:
            return [TopicEndpointInfo(s) for s in self._context.subscriptions if s.topic_name == topic_name]

    def count_publishers(self, topic_name: str) -> int:
        return len(self.get_publishers_info_by_topic(self.resolve_name(topic_name)))

    def count_subscribers(self, topic_name: str) -> int:
        return len(self.get_subscriptions_info_by_topic(self.resolve_name(topic_name)))

    def get_service_names_and_types(self):
        with self._context.lock:
            return sorted((n, [s.srv_type._TYPE]) for n, s in self._context.services.items())

    def get_node_names(self):
        with self._context.lock:
            return sorted({e.node.get_name() for e in self._context.publishers + self._context.subscriptions})


def _validate_parameter_name(name: str) -> None:
    if not name or not isinstance(name, str):
        raise InvalidParameterException(name)

