"""The leader-arm teleoperator of the YAM (`leader.py` core, `node.py` the ROS node)."""
