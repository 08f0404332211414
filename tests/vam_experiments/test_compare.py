"""`vam-stack compare`: pooling, pairing, the verdict rule and one-line errors."""
import json

import pytest

from vam_cli.main import main

pytestmark = pytest.mark.unit


def _results(path, outcomes, seed=0, suite="goal_ood"):
    eps = [{"suite": suite, "seed": seed, "task": i % 10, "episode": i // 10, "success": ok}
           for i, ok in enumerate(outcomes)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"episodes": eps}))
    return str(path)


def test_compare_pools_files_pairs_episodes_and_judges(tmp_path, capsys):
    # A succeeds on 12 episodes B fails, never the reverse: paired, the claim "A above B" is confirmed
    a = [_results(tmp_path / "a0.json", [True] * 32 + [False] * 18, seed=0),
         _results(tmp_path / "a1.json", [True] * 30 + [False] * 20, seed=1)]
    b = [_results(tmp_path / "b0.json", [True] * 26 + [False] * 24, seed=0),
         _results(tmp_path / "b1.json", [True] * 24 + [False] * 26, seed=1)]
    out = tmp_path / "cmp.json"
    assert main(["compare", "--a", *a, "--b", *b, "--sign", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "A: 62/100" in text and "B: 50/100" in text and "paired on 100 episodes" in text
    r = json.loads(out.read_text())
    assert r["paired"]["a_only"] == 12 and r["paired"]["b_only"] == 0 and r["verdict"] == "confirmed"
    assert r["unpaired_ci95"][0] < 0 < r["paired"]["ci95"][0]


def test_compare_says_when_the_exact_test_disagrees(tmp_path, capsys):
    # 9 vs 2 discordant of 100 (the study's claim 1): the paired interval clears 0, McNemar p = 0.065
    base = [True] * 20 + [False] * 80
    a = base[:]
    b = base[:]
    for i in range(20, 29):
        a[i] = True
    for i in range(29, 31):
        b[i] = True
    assert main(["compare", "--a", _results(tmp_path / "a.json", a), "--b", _results(tmp_path / "b.json", b),
                 "--sign", "1"]) == 0
    assert "McNemar's exact test does not" in capsys.readouterr().out


def test_compare_refuses_a_doubled_episode_and_a_bad_file(tmp_path, capsys):
    f = _results(tmp_path / "a.json", [True, False])
    assert main(["compare", "--a", f, f, "--b", f]) == 2
    assert "appears in" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["compare", "--a", str(bad), "--b", f]) == 2
    assert "no 'episodes' list" in capsys.readouterr().err


def test_one_results_file_with_two_schedules_is_refused_naming_them_or_compared_schedule_by_schedule(tmp_path, capsys):
    # issue 70 row 13: an eval results.json holds every schedule's episodes under the same keys; compare said
    # "episode goal/0/0/0 appears in results.json and again in results.json" (the same file named twice)
    eps = [{"suite": "goal", "seed": 0, "task": i, "episode": 0, "guidance": g, "success": ok}
           for g, wins in (("none", 4), ("tr_adaptive", 7)) for i, ok in enumerate([True] * wins + [False] * (10 - wins))]
    f = tmp_path / "results.json"
    f.write_text(json.dumps({"episodes": eps}))
    assert main(["compare", "--a", str(f), "--b", str(f)]) == 2
    err = capsys.readouterr().err
    assert "2 guidance schedules (none, tr_adaptive)" in err and "--a-guidance" in err, err
    assert err.count(str(f)) == 1, err
    assert main(["compare", "--a", str(f), "--a-guidance", "tr_adaptive", "--b", str(f), "--b-guidance", "none"]) == 0
    out = capsys.readouterr().out
    assert f"A: 7/10 = 70 % [40-89]  (tr_adaptive in {f})" in out and f"(none in {f})" in out, out
    assert "paired on 10 episodes" in out and "discordant 3 (A only) vs 0 (B only)" in out, out
    assert main(["compare", "--a", str(f), "--a-guidance", "flat", "--b", str(f), "--b-guidance", "none"]) == 2
    assert "under guidance 'flat' (the files hold none, tr_adaptive)" in capsys.readouterr().err
