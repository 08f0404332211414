"""rclpy.impl.implementation_singleton: `rclpy_implementation` is the (fake) C extension module."""
from rclpy import _rclpy_pybind11 as rclpy_implementation  # noqa: F401
