"""What a lakehouse holds, in a few lines a person reads: the routing versions and the
published one's figures, the stream's committed batches, the routing health and the
monitor's last decision. The demos print them at their end (``make demo``, and the
cluster demo inside the platform's image)."""

from __future__ import annotations

import json
from pathlib import Path


def summarize(lakehouse_root: Path | str) -> None:
    from s3tm.orchestration.reports.store import list_reports
    from spark_jobs.jobs.publish import render_versions
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.routing_store import published_version, versions
    from spark_jobs.lake.validation import data_docs_location

    store = Lakehouse(None, lakehouse_root, engine="rs")
    live = published_version(store)
    print("\nrouting versions:")
    print(render_versions(store))
    if live is not None:
        meta = next(v for v in versions(store) if v["routing_version"] == live)
        evaluation = json.loads(meta["metrics"] or "{}").get("evaluation", {})
        stream = evaluation.get("relative_stream_throughput_vs_hash")
        work = evaluation.get("relative_work_throughput_vs_hash")
        model = evaluation.get("relative_model_throughput_vs_hash")
        # the gate's measure first: the stream's predicted speed-up, matcher work beside it
        figure = (
            f"the stream x{stream:.2f} of hash routing (predicted by its cost model), "
            f"x{work:.2f} by matcher work,"
            if stream is not None and work is not None
            else f"x{work:.2f} of hash routing, by matcher work,"
            if work is not None
            else f"no subscriptions to count matcher work with: the posts-only model's "
            f"x{model or 0:.2f} of hash routing"
        )
        print(
            f"\npublished version {live}: {figure} on {evaluation.get('posts', 0):,} held-out "
            "posts (`s3tm routing list --details`: the model and timed replay beside it)"
        )
    reports = list_reports(lakehouse_root, "remap")
    if reports:
        print(f"run report: {reports[-1]}")
    print(f"Data Docs: {data_docs_location(store)}")


def summarize_stream(lakehouse_root: Path | str) -> None:
    from spark_jobs.lake.delta_io import Lakehouse

    store = Lakehouse(None, lakehouse_root, engine="rs")
    batches = sorted(
        (r for r in store.read_arrow("stream.batches").to_pylist() if r["stage"] == "committed"),
        key=lambda r: r["batch_id"],
    )
    if not batches:
        print("\nstreaming matcher: no batch committed")
        return
    posts = sum(r["posts"] for r in batches)
    seconds = sum(r["seconds_total"] for r in batches)
    print(
        f"\nstreaming matcher: {len(batches)} micro-batch(es), {posts:,} posts -> "
        f"{sum(r['matches'] for r in batches):,} matches, "
        f"{sum(r['deliveries'] for r in batches):,} deliveries in {seconds:.1f}s "
        f"(routing version {batches[-1]['routing_version']})"
    )
    delivery = store.read_arrow("deliveries").slice(0, 1).to_pylist()
    if delivery:
        d = delivery[0]
        print(
            f"  e.g. post {d['post_id']} delivered to {d['subscriber']}: "
            f"subscriptions {d['sub_ids']}"
        )


def summarize_monitor(lakehouse_root: Path | str) -> None:
    from core.monitor.health import RoutingHealth
    from spark_jobs.lake.delta_io import Lakehouse

    store = Lakehouse(None, lakehouse_root, engine="rs")
    if store.exists("stream.health"):
        rows = sorted(store.read_arrow("stream.health").to_pylist(), key=lambda r: r["batch_id"])
        if rows:
            live = RoutingHealth.from_rows(
                [r for r in rows if r["routing_version"] == rows[-1]["routing_version"]]
            )
            work = [w for r in rows[-1:] for w in (r.get("work") or []) if w is not None]
            balance = (
                f"the busiest matcher did x{max(work) / (sum(work) / len(work)):.2f} of the "
                "mean matcher's work (lookups + matches); "
                if work and sum(work)
                else ""
            )
            # a second measure beside the published figure's: say how it differs
            print(
                f"routing health on the live posts (stream.health, {len(rows)} batch(es)): "
                f"{balance}by the posts-only model (posts per matcher, not the lookups and "
                f"matches the published figure above counts) x{live.relative_throughput:.2f} "
                f"of hash routing, spread {live.spread:.2f} (hash {live.hash_spread:.2f}), "
                f"imbalance {live.imbalance:.2f}; hot words now: "
                + (", ".join(h["word"] for h in rows[-1]["hot_words"]) or "none")
            )
    if store.exists("stream.monitor"):
        check = store.read_arrow("stream.monitor").to_pylist()[-1]
        print(
            f"s3tm_monitor: {check['decision']}"
            + "".join(f"\n  - {c}" for c in check["conditions"] or [])
        )
