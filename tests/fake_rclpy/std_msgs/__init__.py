"""Fake std_msgs (tests only): classes from rosbags' typestore, see rclpy/_messages.py."""
