"""Fake std_srvs (tests only)."""
