"""The rclpy exceptions (rclpy/exceptions.py; messages as Jazzy formats them)."""
from __future__ import annotations

from rclpy._rclpy_pybind11 import InvalidHandle  # noqa: F401


class NotInitializedException(Exception):
    def __init__(self, message=None):
        Exception.__init__(self, f"rclpy.init() has not been called. msg:{message}" if message
                           else "rclpy.init() has not been called.")


class NameValidationException(Exception):
    def __init__(self, name_type, name, error_msg, invalid_index):
        Exception.__init__(self, f"Invalid {name_type}: {error_msg}:\n  '{name}'\n   {' ' * invalid_index}^")


class InvalidNamespaceException(NameValidationException):
    def __init__(self, name, error_msg, invalid_index):
        NameValidationException.__init__(self, "namespace", name, error_msg, invalid_index)


class InvalidNodeNameException(NameValidationException):
    def __init__(self, name, error_msg, invalid_index):
        NameValidationException.__init__(self, "node name", name, error_msg, invalid_index)


class InvalidTopicNameException(NameValidationException):
    def __init__(self, name, error_msg, invalid_index):
        NameValidationException.__init__(self, "topic name", name, error_msg, invalid_index)


class InvalidServiceNameException(NameValidationException):
    def __init__(self, name, error_msg="", invalid_index=0):
        NameValidationException.__init__(self, "service name", name, error_msg, invalid_index)


class ParameterException(Exception):
    def __init__(self, error_msg, parameters):
        Exception.__init__(self, f"{error_msg}: {parameters}")


class ParameterNotDeclaredException(ParameterException):
    def __init__(self, parameters):
        ParameterException.__init__(self, "Invalid access to undeclared parameter(s)", parameters)


class ParameterAlreadyDeclaredException(ParameterException):
    def __init__(self, parameters):
        ParameterException.__init__(self, "Parameter(s) already declared", parameters)


class InvalidParameterException(ParameterException):
    def __init__(self, parameter_name):
        ParameterException.__init__(self, "Invalid parameter name", parameter_name)


class InvalidParameterTypeException(ParameterException):
    def __init__(self, desired_parameter, expected_type):
        from rclpy.parameter import Parameter

        ParameterException.__init__(
            self,
            f"Trying to set parameter '{desired_parameter._name}' to '{desired_parameter._value}'"
            f" of type '{Parameter.Type.from_parameter_value(desired_parameter._value).name}'"
            f", expecting type '{expected_type}'",
            desired_parameter.name)


class InvalidParameterValueException(ParameterException):
    def __init__(self, parameter, value, reason):
        ParameterException.__init__(
            self, f"Invalid parameter value ({value}) for parameter. Reason: {reason}", parameter)


class ParameterImmutableException(ParameterException):
    def __init__(self, parameter_name):
        ParameterException.__init__(self, "Attempted to modify read-only parameter", parameter_name)


class ParameterUninitializedException(ParameterException):
    def __init__(self, parameter_name):
        ParameterException.__init__(self, f"The parameter '{parameter_name}' is not initialized", parameter_name)


class ROSInterruptException(Exception):
    def __init__(self):
        Exception.__init__(self, "rclpy.shutdown() has been called")
