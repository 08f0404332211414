"""Fake rcl_interfaces (tests only): classes from rosbags' typestore, see rclpy/_messages.py."""
