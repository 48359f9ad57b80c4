"""The experiment commands on a tiny generated corpus: tables, baselines and files."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from s3tm.cli.main import main


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exp") / "corpus.jsonl.gz"
    assert (
        main(["-q", "demo-corpus", "--posts", "3000", "--words", "1500", "--out", str(path)]) == 0
    )
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_scalability_compares_every_variant_with_hash(corpus, tmp_path):
    assert (
        main(
            f"-q experiment scalability --corpus {corpus} --nodes 2,8 --algorithms "
            "salb,salb+split,gFCL --subscriptions 300 --lda-iterations 1 --repeats "
            f"1 --out {tmp_path}".split()
        )
        == 0
    )
    rows = _rows(tmp_path / "scalability.csv")
    assert {(r["workload"], r["N"], r["algorithm"]) for r in rows} == {
        (w, n, a)
        for w in ("tweet", "topic")
        for n in ("2", "8")
        for a in ("hash", "salb", "salb+split", "gFCL")
    }
    hashed = {(r["workload"], r["N"]): r for r in rows if r["algorithm"] == "hash"}
    for row in rows:
        if row["algorithm"] == "hash":
            assert float(row["model_rel_throughput"]) == 1.0
            assert float(row["replay_work_rel_throughput"]) == 1.0
        # the paper's model: throughput N / (spread x imbalance), over hash's at that N
        base = hashed[(row["workload"], row["N"])]
        cost = float(row["spread"]) * float(row["imbalance"])
        base_cost = float(base["spread"]) * float(base["imbalance"])
        assert float(row["model_rel_throughput"]) == pytest.approx(base_cost / cost, rel=1e-3)
        assert int(row["subscriptions"]) == 300
    _assert_a_drawn_figure(tmp_path / "scalability.png")


def test_subscriptions_past_the_training_posts_registers_every_one_asked_for(corpus, tmp_path):
    """3,000 posts, 2,400 of them training: 5,000 tweet-based subscriptions repeat posts,
    they are not capped (a count the corpus cannot give distinctly is still that count)."""
    args = ["-q", "experiment", "subscriptions", "--corpus", str(corpus), "--nodes", "4"]
    args += ["--counts", "100,5000", "--algorithms", "salb2", "--lda-iterations", "1"]
    assert main([*args, "--repeats", "1", "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "subscriptions.csv")
    assert {(r["workload"], r["algorithm"], int(r["subscriptions"])) for r in rows} == {
        (w, a, n) for w in ("tweet", "topic") for a in ("hash", "salb2") for n in (100, 5000)
    }
    assert len(rows) == 8
    tweet = {(r["algorithm"], int(r["subscriptions"])): r for r in rows if r["workload"] == "tweet"}
    # twice as many subscriptions as posts: the held-out posts meet more matches
    assert int(tweet["hash", 5000]["matches"]) > int(tweet["hash", 100]["matches"])


def _assert_a_drawn_figure(path) -> None:
    """A PNG that decodes to a picture with something drawn on it (not a blank canvas)."""
    import matplotlib.image

    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 200
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::97].tolist()}) > 3


def test_corpus_size_and_learning_time(corpus, tmp_path):
    assert (
        main(
            f"-q experiment corpus-size --corpus {corpus} --nodes 4 --algorithms "
            "salb --subscriptions 200 --sizes 500,100000 --lda-iterations 1 "
            f"--repeats 1 --out {tmp_path}".split()
        )
        == 0
    )
    sizes = {r["training_posts"] for r in _rows(tmp_path / "corpus_size.csv")}
    assert len(sizes) == 1 and 450 < int(sizes.pop()) < 550  # 100000 exceeds the corpus
    assert (
        main(
            f"-q experiment learning-time --corpus {corpus} --nodes 4 --algorithms "
            f"salb,gNFCL --sizes 1000,2000 --subscriptions 500 --out {tmp_path}".split()
        )
        == 0
    )
    rows = _rows(tmp_path / "learning_time.csv")
    assert [r["algorithm"] for r in rows] == ["salb", "gNFCL", "salb", "gNFCL"]
    # both learners on the same sample of each size (a hash sample: about that many posts)
    posts = [int(r["training_posts"]) for r in rows]
    assert posts[0] == posts[1] and posts[2] == posts[3]
    assert abs(posts[0] - 1000) < 50 and abs(posts[2] - 2000) < 100
    # timed within the call's own wall time
    assert all(0 < float(r["learn_s"]) <= float(r["wall_s"]) for r in rows)
    # both learners map the subscribed words a sample holds; the larger sample holds as many
    mapped = [int(r["mapped_words"]) for r in rows]
    assert mapped[0] == mapped[1] <= mapped[2] == mapped[3]


def test_shedding_prints_one_json_object_per_point(corpus, tmp_path, capsys):
    import json

    assert (
        main(
            f"-q experiment shedding --corpus {corpus} --nodes 8 --subscriptions 300 "
            "--workloads tweet,topic --caps 4,2,1.5,1 --lda-iterations 1 --json "
            f"--out {tmp_path}".split()
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    utilities = ("consensus", "subscription", "yield", "random", "oracle")
    assert {(r["workload"], r["utility"], r["m"]) for r in lines} == {
        (w, u, m) for w in ("tweet", "topic") for u in utilities for m in (4.0, 2.0, 1.5, 1.0)
    }
    for r in lines:
        assert {"load_shed_pairs", "load_shed_work", "accuracy"} <= set(r)
        assert 0.0 <= r["accuracy"] <= 1.0 and 0.0 <= r["load_shed_pairs"] < 1.0
    for w in ("tweet", "topic"):
        # every utility sheds the same pairs at a cap; a smaller cap sheds more
        shed = {r["m"]: r["load_shed_pairs"] for r in lines if r["workload"] == w}
        assert shed[1.0] > shed[2.0] > shed[4.0]
    assert (tmp_path / "shedding.csv").exists()
    _assert_a_drawn_figure(tmp_path / "shedding.png")


def test_shedding_control_meets_the_bars_in_simulated_time(corpus, tmp_path):
    assert (
        main(
            f"-q experiment shedding-control --corpus {corpus} --nodes 8 "
            f"--subscriptions 300 --duration 2000 --out {tmp_path}".split()
        )
        == 0
    )
    summary = {r["rule"]: r for r in _rows(tmp_path / "shedding_control_summary.csv")}
    rate = summary["rate"]
    assert float(rate["dropped_posts"]) == 0.0
    assert int(rate["max_level_changes"]) <= 2
    assert int(rate["final_level"]) == 0
    _assert_a_drawn_figure(tmp_path / "shedding_control.png")


def test_drift_evaluates_the_window_0_mapping_on_later_windows(tmp_path, capsys):
    import json

    corpus = tmp_path / "timed.jsonl.gz"
    assert (
        main(
            "-q demo-corpus --posts 6000 --words 3000 --days 4 --burst-day 2 "
            f"--burst-share 0.3 --out {corpus}".split()
        )
        == 0
    )
    capsys.readouterr()
    args = ["-q", "experiment", "drift", "--corpus", str(corpus), "--window-days", "1"]
    args += ["--min-posts", "500", "--nodes", "8", "--algorithms", "salb+split"]
    args += ["--subscriptions", "300", "--lda-iterations", "1", "--json", "--out", str(tmp_path)]
    assert main(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    keys = {"algorithm", "window", "relative_throughput", "spread", "imbalance", "relearned"}
    assert all(keys <= set(line) for line in lines)
    fixed = {(r["algorithm"], r["window"]): r for r in lines if not r["relearned"]}
    relearned = {r["window"]: r for r in lines if r["learned_on"] == "previous window"}
    in_window = {r["window"]: r for r in lines if r["learned_on"] == "window's first half"}
    assert set(fixed) == {(a, w) for a in ("hash", "salb+split") for w in range(4)}
    assert sorted(relearned) == sorted(in_window) == [1, 2, 3]
    assert all(r["relearned"] for r in [*relearned.values(), *in_window.values()])
    # the in-window line is judged on the window's second half
    assert all(in_window[w]["posts"] < relearned[w]["posts"] for w in (1, 2, 3))
    # on the burst day only a mapping learned within the day knows the burst word
    assert in_window[2]["relative_throughput"] > relearned[2]["relative_throughput"]
    # hash is its own baseline; the learned mapping beats it on its own window
    assert all(fixed["hash", w]["relative_throughput"] == pytest.approx(1.0) for w in range(4))
    assert fixed["salb+split", 0]["relative_throughput"] > 1.0
    # the burst of day 2 hurts the fixed mapping; re-learning on day 2 restores day 3
    assert fixed["salb+split", 3]["relative_throughput"] < relearned[3]["relative_throughput"]
    assert (tmp_path / "drift.csv").is_file()
    _assert_a_drawn_figure(tmp_path / "drift.png")
    # an untimed corpus gets a clear error, not a crash
    untimed = tmp_path / "untimed.jsonl"
    untimed.write_text('{"id": "1", "text": "bado fumo"}\n{"id": "2", "text": "bado"}\n')
    assert (
        main(["-q", "experiment", "drift", "--corpus", str(untimed), "--out", str(tmp_path)]) != 0
    )


def test_remap_cost_compares_full_and_incremental_remaps(tmp_path, capsys):
    import json

    corpus = tmp_path / "timed.jsonl.gz"
    args = ["-q", "demo-corpus", "--posts", "8000", "--words", "3000", "--days", "5"]
    assert main([*args, "--out", str(corpus)]) == 0
    capsys.readouterr()
    args = ["-q", "experiment", "remap-cost", "--corpus", str(corpus), "--window-days", "1"]
    args += ["--min-posts", "500", "--nodes", "8", "--subscriptions", "800", "--max-moved", "0.05"]
    assert main([*args, "--json", "--out", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    full = {r["window"]: r for r in lines if r["remap"] == "full"}
    incremental = {r["window"]: r for r in lines if r["remap"] == "incremental"}
    # five windows: learn on 0, remap at the end of 1..3, each judged on the next window
    assert sorted(full) == sorted(incremental) == [1, 2, 3]
    for w in (1, 2, 3):
        # the budget holds (counted per word, so the subscriptions moved stay below it) ...
        assert incremental[w]["moved_fraction"] <= 0.05
        # ... where a full remap re-deals much of the placement
        assert full[w]["moved_subscriptions"] > incremental[w]["moved_subscriptions"]
        # ... fewer with the published matcher ids than with its own (the same routing)
        assert full[w]["moved_fraction"] <= full[w]["moved_fraction_unaligned"]
        assert incremental[w]["moved_fraction_unaligned"] == incremental[w]["moved_fraction"]
        assert incremental[w]["relative_throughput"] > 0.8 * full[w]["relative_throughput"]
        assert 0 <= incremental[w]["changed_matchers"] <= 8
        # counted work on the next window, relative to hash's (the publish gate's measure)
        assert full[w]["work_relative_throughput"] > 0.5
        assert incremental[w]["work_relative_throughput"] > 0.5
    # the DAG's policy: incremental unless a full remap does >10% better on the learning
    # window's held-out posts
    policy = {r["window"]: r for r in lines if r["remap"] == "policy"}
    assert sorted(policy) == [1, 2, 3]
    for w, row in policy.items():
        assert row["chosen"] in ("incremental", "full")
        if row["chosen"] == "full":  # the full remap itself, learned once per window
            for column in (
                "relative_throughput",
                "training_relative_throughput",
                "held_out_relative_throughput",
            ):
                assert row[column] == full[w][column]
        else:
            assert full[w]["held_out_relative_throughput"] <= 1.1 * (
                row["held_out_relative_throughput"] + 1e-9
            )
    assert (tmp_path / "remap_cost.csv").is_file()
    _assert_a_drawn_figure(tmp_path / "remap_cost.png")
    # a policy that never pays for a full remap is the incremental chain (judged on a
    # random sample of each window here, its latest posts above)
    assert (
        main(
            [
                *args,
                "--full-remap-gain",
                "100",
                "--judge",
                "random",
                "--json",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for column in ("relative_throughput", "moved_subscriptions", "chosen"):
        by_chain = {
            remap: [r[column] for r in lines if r["remap"] == remap]
            for remap in ("incremental", "policy")
        }
        assert by_chain["policy"] == by_chain["incremental"], column
    assert main([*args, "--full-remap-gain", "-1", "--out", str(tmp_path)]) != 0
    # free moves (--penalty 0) still stay within the budget; a negative penalty is refused
    assert main([*args, "--penalty", "0", "--json", "--out", str(tmp_path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(r["moved_fraction"] <= 0.05 for r in lines if r["remap"] == "incremental")
    assert main([*args, "--penalty", "-1", "--out", str(tmp_path)]) != 0
    # two windows are not enough for a remap judged on the next one
    short = tmp_path / "short.jsonl.gz"
    assert main(["-q", "demo-corpus", "--posts", "2000", "--days", "2", "--out", str(short)]) == 0
    args = ["-q", "experiment", "remap-cost", "--corpus", str(short), "--window-days", "1"]
    assert main([*args, "--min-posts", "500", "--out", str(tmp_path)]) != 0


def test_remap_cost_judges_on_the_latest_posts_of_a_window():
    from benchmarks.experiments.drift import Window
    from benchmarks.experiments.remap_cost import _held_out
    from core.corpus import corpus_from_word_lists

    posts = corpus_from_word_lists([["a"]] * 10)
    seconds = np.array([5, 1, 9, 3, 7, 2, 8, 4, 6, 0], dtype=np.int64)
    window = Window(1, np.datetime64(0, "s"), posts, seconds)
    # the latest 20% by time: the posts at seconds 9 and 8
    assert np.flatnonzero(_held_out(window, "recent", 0)).tolist() == [2, 6]
    # a random sample holds out about as many, wherever they fall
    assert _held_out(window, "random", 0).shape == (10,)
    untimed = Window(1, np.datetime64(0, "s"), posts)
    assert _held_out(untimed, "recent", 0).tolist() == _held_out(untimed, "random", 0).tolist()
