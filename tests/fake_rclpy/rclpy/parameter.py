"""rclpy.parameter.Parameter with its Type enum (type inferred from the value as rclpy does)."""
from __future__ import annotations

from enum import IntEnum


class Parameter:
    class Type(IntEnum):
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
        def from_parameter_value(cls, value):
            if value is None:
                return cls.NOT_SET
            if isinstance(value, bool):
                return cls.BOOL
            if isinstance(value, int):
                return cls.INTEGER
            if isinstance(value, float):
                return cls.DOUBLE
            if isinstance(value, str):
                return cls.STRING
            if isinstance(value, (list, tuple)):
                if value and all(isinstance(v, bool) for v in value):
                    return cls.BOOL_ARRAY
                if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    return cls.INTEGER_ARRAY
                if value and all(isinstance(v, float) for v in value):
                    return cls.DOUBLE_ARRAY
                if value and all(isinstance(v, str) for v in value):
                    return cls.STRING_ARRAY
            raise TypeError(f"The given value is not one of the allowed types '{value!r}'.")

    def __init__(self, name: str, type_=None, value=None):
        if type_ is None:
            type_ = Parameter.Type.from_parameter_value(value)
        self._name, self._type, self._value = name, Parameter.Type(type_), value

    @property
    def name(self):
        return self._name

    @property
    def type_(self):
        return self._type

    @property
    def value(self):
        return self._value

    def __repr__(self):
        return f"Parameter({self._name!r}, {self._type.name}, {self._value!r})"
