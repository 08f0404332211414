"""Demonstrations in and out: LeRobotDataset v3 and MCAP import, LeRobot v3 export, the ROS recorder."""
