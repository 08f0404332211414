"""vam_stack: shared plain-Python utilities (CLI, config loading, paths) of the ROS 2 package."""
__version__ = "0.1.0"
