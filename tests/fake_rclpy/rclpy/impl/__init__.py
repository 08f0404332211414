"""rclpy.impl of the fake: the logger (rcutils_logger), its severities, the "C extension"."""
