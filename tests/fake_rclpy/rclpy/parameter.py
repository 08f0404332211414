"""rclpy.parameter.Parameter as in rclpy (rclpy/parameter.py, Humble and Jazzy).

Parameter.Type is an Enum (not an int) whose values are rcl_interfaces' ParameterType
constants; the type is inferred from the value (bool before int; a list/tuple whose items are
all bytes / bool / int / float / str, so an empty list is a BYTE_ARRAY; mixed lists and
other objects raise TypeError), and a type given with a value that does not agree raises
ValueError ("Type '...' and value '...' do not agree").
"""
from __future__ import annotations

import array
from enum import Enum

PARAMETER_SEPARATOR_STRING = "."


class Parameter:
    class Type(Enum):
        NOT_SET = 0
        BOOL = 1
        INTEGER = 2
        DOUBLE = 3
        STRING = 4
        BYTE_ARRAY = 5
        BOOL_ARRAY = 6
        INTEGER_ARRAY = 7
        DOUBLE_ARRAY = 8
        STRING_ARRAY = 9

        @classmethod
        def from_parameter_value(cls, parameter_value):
            v = parameter_value
            if v is None:
                return cls.NOT_SET
            if isinstance(v, bool):
                return cls.BOOL
            if isinstance(v, int):
                return cls.INTEGER
            if isinstance(v, float):
                return cls.DOUBLE
            if isinstance(v, str):
                return cls.STRING
            if isinstance(v, (list, tuple, array.array)):
                for kind, t in ((bytes, cls.BYTE_ARRAY), (bool, cls.BOOL_ARRAY), (int, cls.INTEGER_ARRAY),
                                (float, cls.DOUBLE_ARRAY), (str, cls.STRING_ARRAY)):
                    if all(isinstance(x, kind) for x in v):
                        return t
                raise TypeError(f"The given value is not a list of one of the allowed types '{v}'.")
            raise TypeError(f"The given value is not one of the allowed types '{v}'.")

        def check(self, parameter_value) -> bool:
            v, T = parameter_value, Parameter.Type
            seq = isinstance(v, (list, tuple))
            numseq = isinstance(v, (list, tuple, array.array))
            return {
                T.NOT_SET: lambda: v is None,
                T.BOOL: lambda: isinstance(v, bool),
                T.INTEGER: lambda: isinstance(v, int),
                T.DOUBLE: lambda: isinstance(v, float),
                T.STRING: lambda: isinstance(v, str),
                T.BYTE_ARRAY: lambda: seq and all(isinstance(x, bytes) and len(x) == 1 for x in v),
                T.BOOL_ARRAY: lambda: seq and all(isinstance(x, bool) for x in v),
                T.INTEGER_ARRAY: lambda: numseq and all(isinstance(x, int) for x in v),
                T.DOUBLE_ARRAY: lambda: numseq and all(isinstance(x, float) for x in v),
                T.STRING_ARRAY: lambda: seq and all(isinstance(x, str) for x in v),
            }[self]()

    def __init__(self, name, type_=None, value=None):
        if type_ is None:
            type_ = Parameter.Type.from_parameter_value(value)
        if not isinstance(type_, Parameter.Type):
            raise TypeError("type must be an instance of '{}'".format(repr(Parameter.Type)))
        if not type_.check(value):
            raise ValueError("Type '{}' and value '{}' do not agree".format(type_, value))
        self._type_, self._name, self._value = type_, name, value

    @property
    def name(self):
        return self._name

    @property
    def type_(self):
        return self._type_

    @property
    def value(self):
        return self._value

    def __repr__(self):
        return f"Parameter({self._name!r}, {self._type_.name}, {self._value!r})"

    def get_parameter_value(self):
        from rcl_interfaces.msg import ParameterValue

        pv = ParameterValue(type=self._type_.value)
        field = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value",
                 5: "byte_array_value", 6: "bool_array_value", 7: "integer_array_value",
                 8: "double_array_value", 9: "string_array_value"}.get(self._type_.value)
        if field is not None:
            setattr(pv, field, list(self._value) if self._type_.value >= 5 else self._value)
        return pv

    def to_parameter_msg(self):
        from rcl_interfaces.msg import Parameter as ParameterMsg

        return ParameterMsg(name=self._name, value=self.get_parameter_value())


def parameter_value_to_python(parameter_value):
    t = parameter_value.type
    fields = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value",
              5: "byte_array_value", 6: "bool_array_value", 7: "integer_array_value",
              8: "double_array_value", 9: "string_array_value"}
    if t == 0:
        return None
    if t not in fields:
        raise RuntimeError(f"unexpected parameter type {t}")
    v = getattr(parameter_value, fields[t])
    return list(v) if t >= 5 else v
