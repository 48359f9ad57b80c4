"""Concurrent writers on one lakehouse (separate processes, as two Airflow runs or a CLI
user and a DAG would be): subscription ids and routing versions are allocated once,
nothing registered is lost, and two remaps publishing at once leave exactly one version
published, each with its own complete mapping."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.routing_store import versions

REGISTER = textwrap.dedent("""
    import json, sys
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.subscription_store import add_subscriptions
    lake = Lakehouse(None, sys.argv[1])
    ids = []
    for k in range(int(sys.argv[3])):
        ids += add_subscriptions(lake, [f"white house {k}", "vote", "election night"], sys.argv[2])
    print(json.dumps(ids))
""")

REMAP = textwrap.dedent("""
    import json, sys
    from core.corpus.arrays import corpus_from_word_lists
    from core.learn import learn_mapping
    from spark_jobs.jobs.publish import publish
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import register_table
    lake = Lakehouse(None, sys.argv[1])
    nodes = int(sys.argv[2])
    posts = [["white", "hous"], ["elect", "night"], ["hous", "vote"], ["vote", "w%d" % nodes]] * 30
    routing = learn_mapping(corpus_from_word_lists(posts), nodes, "salb").table
    version = register_table(lake, routing, algorithm="salb")
    outcome = publish(lake, version, skip_validation=True)
    print(json.dumps({"version": version, "rows": len(routing.to_frame()), **outcome},
                     default=str))
""")


def _spawn(code: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen[str]) -> Any:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def test_concurrent_registrations_get_distinct_ids_and_none_is_lost(tmp_path: Path):
    root = tmp_path / "lakehouse"
    writers = [_spawn(REGISTER, root, f"user{w}", 8) for w in range(4)]
    returned = [_result(w) for w in writers]
    all_ids = [i for ids in returned for i in ids]
    assert len(all_ids) == len(set(all_ids)) == 4 * 8 * 3
    rows = Lakehouse(None, root).read_arrow("subscriptions.registry").to_pylist()
    assert sorted(r["sub_id"] for r in rows) == sorted(all_ids)
    for w, ids in enumerate(returned):
        assert {r["subscriber"] for r in rows if r["sub_id"] in set(ids)} == {f"user{w}"}


def test_two_remaps_and_registrations_at_once(tmp_path: Path):
    root = tmp_path / "lakehouse"
    remaps = [_spawn(REMAP, root, nodes) for nodes in (3, 5)]
    registering = _spawn(REGISTER, root, "during-publish", 5)
    outcomes = [_result(r) for r in remaps]
    registered = _result(registering)
    lake = Lakehouse(None, root)
    rows = versions(lake)
    assert sorted(o["version"] for o in outcomes) == [1, 2]
    assert [r["routing_version"] for r in rows] == [1, 2]
    # each version's mapping is complete and its own (N as learned)
    mappings = lake.read_arrow("routing.mappings").to_pylist()
    for outcome in outcomes:
        mine = [m for m in mappings if m["routing_version"] == outcome["version"]]
        assert len(mine) == outcome["rows"]
        n = {r["routing_version"]: r["n_matchers"] for r in rows}[outcome["version"]]
        assert max(m["matcher_id"] for m in mine) < n
    # both publishes happened, one after the other: exactly one version is published
    assert all(o["changed"] for o in outcomes)
    statuses = sorted(r["status"] for r in rows)
    assert statuses == ["published", "retired"]
    second = max(outcomes, key=lambda o: o["retired"] is not None)
    assert second["retired"] is not None  # the later publish saw the earlier one
    registry = lake.read_arrow("subscriptions.registry").to_pylist()
    assert sorted(r["sub_id"] for r in registry) == sorted(registered)
