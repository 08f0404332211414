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
