"""Safety filter: every limit, NaN/inf, e-stop latch and clear, stale commands, watchdog."""
from __future__ import annotations

import numpy as np
import pytest

from vam_control.safety import SafetyConfig, SafetyFilter, load_safety_config
from vam_stack.config import ConfigError
from vam_stack.paths import config_dir

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def cfg() -> SafetyConfig:
    return load_safety_config()


@pytest.fixture
def home(cfg) -> np.ndarray:
    # A pose inside every range: joint2/3 bent as in i2rt's 'home' keyframe, grippers half open.
    q = np.array([0.0, 1.047, 1.047, 0.0, 0.0, 0.0, 0.5] * cfg.arms)
    return q


def make(cfg, home, clock=None):
    f = SafetyFilter(cfg, clock=clock or FakeClock())
    f.reset(home)
    return f


def test_shipped_yaml_loads_with_documented_numbers(cfg):
    assert cfg.dim == 14 and cfg.arms == 2
    lo, hi, step = cfg.bounds()
    assert lo.shape == hi.shape == step.shape == (14,)
    # 0.15 rad inside each hard stop, except joints 2 and 3 at 0: the folded rest pose (issue 57 row 8)
    assert lo[1] == lo[2] == 0.0 and hi[1] == pytest.approx(3.66519 - 0.15)
    assert lo[0] == pytest.approx(-2.61799 + 0.15) and hi[3] == pytest.approx(1.5708 - 0.15)
    assert (lo[6], hi[6]) == (0.0, 1.0) and (lo[13], hi[13]) == (0.0, 1.0)
    assert step[0] == pytest.approx(2.0 / 30.0) and step[10] == pytest.approx(3.0 / 30.0)
    assert cfg.gripper_dims() == (6, 13)


def test_missing_file_is_a_startup_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_safety_config(tmp_path / "nope.yaml")


def test_malformed_files_are_startup_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("yam_safety: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_safety_config(bad)
    bad.write_text("yam_safety:\n  max_joint_velocty: [1, 1, 1, 1, 1, 1]\n")
    with pytest.raises(ConfigError, match="did you mean 'max_joint_velocity'"):
        load_safety_config(bad)
    shipped = (config_dir() / "yam_safety.yaml").read_text()
    bad.write_text(shipped.replace("joint_lower: [-2.61799, 0.0, 0.0, -1.69297, -1.5708, -2.0944]",
                                   "joint_lower: [0, 0, 0]"))
    with pytest.raises(ConfigError, match=r"joint_lower needs 6 values, got \(0.0, 0.0, 0.0\)"):
        load_safety_config(bad)
    bad.write_text("yam_safety:\n  joint_lower: [0, 0, 0, 0, 0, 0]\n")     # the rest would silently default
    with pytest.raises(ConfigError, match="missing required fields 'arms', 'joint_upper'"):
        load_safety_config(bad)
    bad.write_text("other: {}\n")
    with pytest.raises(ConfigError, match="missing section 'yam_safety'"):
        load_safety_config(bad)


@pytest.mark.parametrize("field,value,msg", [
    ("rate_hz", 0.0, "rate_hz must be > 0, got 0.0"),
    ("margin_rad", 2.0, "is empty after margin_rad=2.0"),
    ("gripper_min", 1.5, "gripper range"),
    ("stale_after_s", -1.0, "stale_after_s must be > 0, got -1.0"),
    ("max_joint_velocity", (1.0, 1.0, 1.0, 1.0, 1.0, 0.0), "max_joint_velocity must be > 0"),
])
def test_config_values_are_validated(field, value, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        SafetyConfig(**{field: value})


def test_command_before_reset_is_refused(cfg, home):
    f = SafetyFilter(cfg)
    with pytest.raises(RuntimeError, match="reset"):
        f.filter(home)


def test_wrong_shape_names_the_shape(cfg, home):
    f = make(cfg, home)
    with pytest.raises(ValueError, match=r"shape \(14,\), got \(7,\)"):
        f.filter(home[:7])
    with pytest.raises(ValueError, match="non-finite"):
        f.reset(np.full(14, np.nan))


def test_in_range_small_step_passes_unchanged(cfg, home):
    f = make(cfg, home)
    t = home + 0.01
    r = f.filter(t)
    np.testing.assert_array_equal(r.sent, t)
    assert r.clipped == frozenset() and not r.held and r.reason is None
    assert f.counts["sent"] == 1 and f.counts["position"] == 0


def test_position_limit_clips_joint(cfg, home):
    lo, hi, _ = cfg.bounds()
    start = home.copy()
    start[1] = hi[1] - 0.01  # near joint 2's upper limit, so the rate limit is not what clips
    f = make(cfg, start)
    t = start.copy()
    t[1] = hi[1] + 0.03
    r = f.filter(t)
    assert r.sent[1] == pytest.approx(hi[1])
    assert r.clipped == {"position"} and r.clipped_dims["position"] == (1,)
    assert f.counts["position"] == 1 and f.counts["velocity"] == 0
    t = start.copy()
    t[8] = lo[8] - 5.0  # right arm joint 2 far below its limit: position and velocity both clip
    r = f.filter(t)
    assert r.clipped == {"position", "velocity"} and 8 in r.clipped_dims["position"]


def test_gripper_range_clips(cfg, home):
    start = home.copy()
    start[6], start[13] = 0.98, 0.02
    f = make(cfg, start)
    t = start.copy()
    t[6], t[13] = 1.02, -0.03
    r = f.filter(t)
    assert (r.sent[6], r.sent[13]) == (1.0, 0.0)
    assert r.clipped == {"gripper"} and r.clipped_dims["gripper"] == (6, 13)


def test_velocity_limit_caps_per_tick_change(cfg, home):
    _, _, step = cfg.bounds()
    f = make(cfg, home)
    t = home.copy()
    t[0] += 0.5
    t[3] -= 0.5
    sent = []
    for k in range(10):
        r = f.filter(t, now=100.0 + k / cfg.rate_hz)       # one command per tick
        sent.append(r.sent.copy())
    d = np.diff(np.stack([home] + sent), axis=0)
    assert np.all(np.abs(d) <= step + 1e-12)
    assert sent[0][0] == pytest.approx(home[0] + step[0]) and sent[0][3] == pytest.approx(home[3] - step[3])
    np.testing.assert_allclose(sent[-1], t)  # it gets there: 0.5 rad in 8 (DM4340) / 5 (DM4310) ticks
    assert f.counts["velocity"] == 7  # ceil(0.5 / (2/30)) - 1 ticks were clipped


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_targets_are_rejected_and_held(cfg, home, bad):
    f = make(cfg, home)
    f.filter(home + 0.01)
    t = home.copy()
    t[4] = bad
    r = f.filter(t)
    assert r.held and r.reason == "nonfinite"
    np.testing.assert_array_equal(r.sent, home + 0.01)
    assert np.all(np.isfinite(r.sent))
    assert f.counts["nonfinite"] == 1 and f.counts["held"] == 1


def test_estop_latches_until_explicitly_cleared(cfg, home):
    _, _, step = cfg.bounds()
    f = make(cfg, home)
    f.estop("operator button")
    assert f.estopped
    for k in range(5):
        r = f.filter(home + 0.03 * (k + 1))
        assert r.held and r.reason == "estop"
        np.testing.assert_array_equal(r.sent, home)
    assert f.poll().reason == "estop"
    assert f.counts["estop"] == 5
    f.clear_estop()
    assert not f.estopped
    r = f.filter(home + 0.5)
    assert not r.held and r.clipped == {"velocity"}  # resumes rate-limited from the held target
    np.testing.assert_allclose(r.sent, home + step)


def test_stale_stamped_command_is_rejected(cfg, home):
    clock = FakeClock()
    f = make(cfg, home, clock)
    r = f.filter(home + 0.01, stamp=clock.t - 0.5)
    assert r.held and r.reason == "stale" and f.counts["stale"] == 1
    np.testing.assert_array_equal(r.sent, home)
    r = f.filter(home + 0.01, stamp=clock.t - 0.05)
    assert not r.held


def test_watchdog_holds_after_silence_and_rearms(cfg, home):
    clock = FakeClock()
    f = make(cfg, home, clock)
    f.filter(home + 0.01)
    clock.t += 0.1
    r = f.poll()
    assert not r.held
    clock.t += 0.15  # 0.25 s without a command > stale_after_s = 0.2
    r = f.poll()
    assert r.held and r.reason == "stale"
    np.testing.assert_array_equal(r.sent, home + 0.01)
    f.poll()
    assert f.counts["watchdog"] == 1  # counted once per silence, not per poll
    f.filter(home + 0.02)
    assert not f.poll().held
    clock.t += 0.3
    assert f.poll().held and f.counts["watchdog"] == 2


# --- issue 57 row 8: the rest pose against the margin ----------------------------------------------

REST = np.array([0.0] * 6 + [0.0] + [0.0] * 6 + [0.0])     # the folded rest: every joint 0, grippers closed


def test_the_rest_pose_passes_unchanged(cfg):
    f = make(cfg, REST)
    r = f.filter(REST)
    np.testing.assert_array_equal(r.sent, REST)
    assert r.clipped == frozenset() and not r.held


def test_the_policy_path_reaches_the_rest_pose_from_the_home_keyframe(cfg, home):
    """Walking from i2rt's bent 'home' keyframe to the rest pose one tick at a time ends exactly at
    the rest pose (with margin 0.15 at joints 2/3's lower ends it stopped 0.15 rad short)."""
    clock = FakeClock()
    f = make(cfg, home, clock)
    for _ in range(40):                                  # 1.047 rad at 2 rad/s: 16 ticks at 30 Hz
        clock.t += 1 / 30
        r = f.filter(REST, stamp=clock.t)
    np.testing.assert_allclose(r.sent, REST, atol=1e-12)
    assert "position" not in r.clipped


@pytest.mark.parametrize("bus", ["damiao", "dynamixel"])
def test_the_driver_home_pose_is_inside_the_filter_and_the_layers_hold(cfg, bus):
    from vam_stack.robot import check_layers
    from yam_driver.config import default_config_path, load_config

    driver = load_config(default_config_path(bus))
    check_layers(driver, cfg)                             # the driver's limits sit inside the filter's ranges
    if driver.home_pose is not None:
        lo, hi, _ = cfg.bounds()
        home = np.asarray(driver.home_pose)
        assert ((home >= lo) & (home <= hi)).all(), {driver.joint_names[i]: home[i] for i in range(14)
                                                      if not lo[i] <= home[i] <= hi[i]}


def test_nothing_outside_the_model_range_ever_passes(cfg):
    """However far a command asks, what the filter sends stays within the model's ranges (the
    margins are never negative), and at least margin_rad inside them at every other end."""
    model_lo = np.tile(np.r_[cfg.joint_lower, cfg.gripper_min], cfg.arms)
    model_hi = np.tile(np.r_[cfg.joint_upper, cfg.gripper_max], cfg.arms)
    lo, hi, _ = cfg.bounds()
    assert (lo >= model_lo).all() and (hi <= model_hi).all()
    rng = np.random.default_rng(0)
    clock = FakeClock()
    f = make(cfg, REST, clock)
    for _ in range(600):
        clock.t += 1 / 30
        t = rng.choice([-10.0, 10.0], size=14) * rng.random(14)
        sent = f.filter(t, stamp=clock.t).sent
        assert ((sent >= model_lo) & (sent <= model_hi)).all() and ((sent >= lo - 1e-12) & (sent <= hi + 1e-12)).all()


@pytest.mark.parametrize("field,value,msg", [
    ("margin_lower_rad", (0.15, -0.1, 0.0, 0.15, 0.15, 0.15), r"margin_lower_rad\[1\] \(joint 2\) must be in \[0, 0.5\] "
                                                              r"rad \(never outside the model range\), got -0.1"),
    ("margin_upper_rad", (0.15,) * 5, r"margin_upper_rad needs 6 values"),
    ("margin_upper_rad", (0.15, 0.15, float("inf"), 0.15, 0.15, 0.15), r"margin_upper_rad\[2\] .* got inf"),
    ("margin_lower_rad", (0.15, 0.5, 0.0, 0.15, 0.15, 0.15), None),
])
def test_per_joint_margins_are_checked(field, value, msg):
    if msg is None:                                        # allowed: 0.5 at joint 2's lower end
        assert SafetyConfig(**{field: value}).bounds()[0][1] == pytest.approx(0.5)
        return
    with pytest.raises(ConfigError, match=msg):
        SafetyConfig(**{field: value})
