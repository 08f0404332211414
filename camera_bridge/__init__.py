"""camera_bridge package."""
