"""libero_real: real LIBERO episodes (a separate virtual environment) behind the bridge interface.

`RealLiberoEnv` starts `server.py` with the LIBERO environment's interpreter and speaks a small
framed protocol (`protocol.py`) over its pipes; `check.py` compares the mocked bridge's
observation and action conventions with real LIBERO's. Optional: nothing here is imported by
the default pipeline, and the real-LIBERO tests run only when $VAM_LIBERO_PYTHON is set.
"""
