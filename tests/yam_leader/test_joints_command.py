"""vam-stack joints: every joint read with torque off and the sign of each hand motion, on emulated
motors (the follower's Damiao arm over virtual CAN, the leader's Dynamixel chain over a pty)."""
from __future__ import annotations

import pytest

from vam_cli.main import main

pytestmark = pytest.mark.unit


def test_the_follower_is_read_with_torque_off_and_each_hand_motion_is_signed(capsys, monkeypatch):
    from yam_driver.emulators import EmulatedRig

    rigs = []
    real_init = EmulatedRig.__init__

    def keep(self, *a, **kw):
        real_init(self, *a, **kw)
        rigs.append(self)

    monkeypatch.setattr(EmulatedRig, "__init__", keep)
    assert main(["joints", "--emulated", "--seconds", "3.4", "--against", "home",
                 "--emulate-move", "left_joint2=0.3", "--emulate-move", "right_joint4=-0.25"]) == 0
    out = capsys.readouterr().out
    assert "damiao, torque off" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] and "_" in line.split()[0]
            and len(line.split()) >= 7}
    assert rows["left_joint2"][1] == "2" and rows["right_gripper"][1] == "7"      # ids as the config says
    assert rows["left_joint2"][-1] == "+0.000"                                  # at the home pose
    assert "left_joint2     (id 2) +0.000 -> +0.300: moved + (servo +0.300 rad)" in out
    assert "right_joint4    (id 4) +0.000 -> -0.250: moved - (servo -0.250 rad)" in out
    assert out.strip().splitlines()[-1] == "moved: left_joint2 +, right_joint4 -"
    assert not any(rigs[0].torque_enabled(n) for n in ("left_joint1", "left_joint2", "right_joint4"))


def test_the_leader_reads_through_its_mapping(capsys):
    assert main(["joints", "--leader", "--emulated", "--seconds", "1.9", "--emulate-move", "left_joint3=0.3"]) == 0
    out = capsys.readouterr().out
    assert "leader (gello_yam)" in out and "dynamixel, torque off" in out
    assert "left_joint3     (id 3) +1.565 -> +1.866: moved +" in out    # follower units (the bus applies sign -1)


def test_a_bus_that_does_not_open_is_one_line(capsys, tmp_path):
    from vam_cli.main import entry
    from vam_stack.paths import config_dir

    leader = tmp_path / "leader.yaml"                                    # ports where nothing is plugged in
    leader.write_text((config_dir() / "yam_leader.yaml").read_text().replace("/dev/ttyUSB", str(tmp_path / "none")))
    assert entry(["joints", "--leader", str(leader), "--seconds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vam-stack joints: error: ") and "docs/bring_up.md" in err[0]


@pytest.mark.parametrize("argv, match", [
    (["--emulate-move", "left_joint2=0.3"], "needs --emulated"),
    (["--emulated", "--emulate-move", "left_elbow=0.3"], "JOINT one of"),
    (["--emulated", "--emulate-move", "left_joint2=up"], "DELTA must be a number"),
    (["--emulated", "--against", "somewhere"], "--against must be home or zero"),
])
def test_bad_arguments_are_refused(argv, match):
    with pytest.raises(ValueError, match=match):
        main(["joints", "--seconds", "0", *argv])


def test_a_watch_in_which_every_motor_faulted_fails_naming_them(capsys, monkeypatch):
    # issue 70 row 9: at load 10.9 every emulated joint faulted ("no reply"), the run said "moved: nothing"
    # and exited 0; here every motor goes silent 0.5 s into the watch
    import threading

    from yam_driver.emulators import EmulatedRig

    real_init = EmulatedRig.__init__

    def silence_later(self, *a, **kw):
        real_init(self, *a, **kw)

        def go_silent():
            for name in self.config.joint_names:
                injector, motor_id = self.faults(name)
                injector.silence(motor_id)
        threading.Timer(0.5, go_silent).start()

    monkeypatch.setattr(EmulatedRig, "__init__", silence_later)
    assert main(["joints", "--emulated", "--seconds", "2.0"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-2] == "moved: nothing"
    assert out[-1].startswith("FAILED: every motor faulted during the watch: left_joint1 ("), out[-1]
    assert "and 10 more" in out[-1] and "emulated motors answer from this machine's CPUs" in out[-1]


def test_a_dynamixel_bus_that_does_not_open_gets_serial_advice_not_can(capsys, tmp_path):
    # issue 70 row 12: `joints --bus dynamixel` with no adapter advised "CAN up at 1 Mbit/s"
    from vam_cli.main import entry
    from vam_stack.paths import config_dir

    cfg = tmp_path / "dxl.yaml"
    cfg.write_text((config_dir() / "yam_driver_dynamixel.yaml").read_text().replace("/dev/ttyUSB",
                                                                                     str(tmp_path / "none")))
    assert entry(["joints", "--config", str(cfg), "--seconds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vam-stack joints: error: "), err
    assert "serial adapter (U2D2)" in err[0] and "dialout" in err[0] and "1000000 baud" in err[0], err
    assert "CAN" not in err[0], err
