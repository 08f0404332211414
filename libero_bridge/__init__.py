"""libero_bridge package."""
