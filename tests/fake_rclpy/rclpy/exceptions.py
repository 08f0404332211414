"""The rclpy exceptions the nodes and tests meet."""


class NotInitializedException(Exception):
    def __init__(self, *args):
        super().__init__("rclpy.init() has not been called", *args)


class ParameterException(Exception):
    pass


class ParameterNotDeclaredException(ParameterException):
    def __init__(self, name):
        super().__init__(f"Invalid access to undeclared parameter(s): {name}")


class ParameterAlreadyDeclaredException(ParameterException):
    def __init__(self, name):
        super().__init__(f"Parameter(s) already declared: {name}")


class InvalidParameterValueException(ParameterException):
    def __init__(self, name, value, reason):
        super().__init__(f"Invalid parameter value ({value!r}) for parameter '{name}'. Reason: {reason}")


class InvalidParameterTypeException(ParameterException):
    def __init__(self, parameter, expected_type):
        super().__init__(f"Trying to set parameter '{parameter.name}' to '{parameter.value!r}' of type "
                         f"'{parameter.type_.name}', expecting type '{expected_type}'")


class InvalidServiceNameException(Exception):
    pass
