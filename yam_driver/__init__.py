"""yam_driver package."""
