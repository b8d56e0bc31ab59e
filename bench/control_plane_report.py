"""bench/control_plane.py's report: its JSON report as the markdown table written to
bench/results/control_plane.md (the targets read from the report itself)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from control_plane_list import LIST_QUERIES


def markdown(report: dict[str, Any], kinds: list[str]) -> str:
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    target = report["targets"]
    lat, thr, lst = report["latency"], report["throughput"], report["list"]
    other = report["other_work"]
    med, cmp_ = lat["median"], lat["vs_launch"]
    launch = med["launch"]
    cols = " | ".join(names[k] for k in kinds)
    lines = [
        "# Control-plane benchmark: ringleader server on SQLite and PostgreSQL",
        "",
        f"{report['date']}; commit {report['code']['commit'][:7]}"
        + (
            f" with uncommitted changes in {len(report['code']['uncommitted_in_src'])} "
            "file(s) of src/ (see the JSON)"
            if report["code"]["uncommitted_in_src"]
            else ""
        )
        + f"; {report['machine']['cpus']} CPUs; server, client, ranks and PostgreSQL share "
        "them. " + "; ".join(report["databases"].values()) + ".",
        "",
        f"| metric | {cols} | peer: `ringleader launch -n 2` | target |",
        "|---|" + "---|" * len(kinds) + "---|---|",
    ]

    def row(metric: str, values: list[str], peer: str = "", target: str = "") -> None:
        lines.append(f"| {metric} | {' | '.join(values)} | {peer} | {target} |")

    def each(fn: Callable[[str], str]) -> list[str]:
        return [fn(k) for k in kinds]

    row("submit -> all pods Running (s)", each(lambda k: f"{med[k]['all_running_s']:.3f}"))
    row(
        "submit -> first optimizer step (s)",
        each(lambda k: f"{med[k]['first_step_s']:.3f}"),
        f"{launch['first_step_s']:.3f}",
    )
    row(
        "submit -> Completed, end to end (s)",
        each(lambda k: f"{med[k]['completed_s']:.3f}"),
        f"{launch['completed_s']:.3f} (wall time)",
    )
    row(
        "end-to-end ratio vs launch",
        each(lambda k: f"{cmp_[k]['completed_ratio_vs_launch']:.3f}"),
        "1",
    )
    row(
        "end-to-end control-plane overhead (s)",
        each(lambda k: f"{cmp_[k]['completed_overhead_s']:+.3f}"),
        "",
        f"< {target['completed_overhead_s_max']:g}",
    )
    tmed = thr["median"]
    row(
        "submissions/s, API only (loops not started)",
        each(lambda k: f"{tmed[k]['api']['submissions_per_s']:.0f}"),
        "",
        f">= {target['submissions_per_s_min']:g}",
    )
    row(
        "submissions/s, loops on (held backend)",
        each(lambda k: f"{tmed[k]['held']['submissions_per_s']:.0f}"),
    )

    def big(kind: str) -> str:
        rate, plain = (tmed[kind][m]["submissions_per_s"] for m in ("api_100kb", "api"))
        return f"{rate:.0f} ({rate / plain:.2f}x)" if plain else f"{rate:.0f}"

    row("submissions/s, API only, ~100 KB commands (x plain)", each(big))
    for mode, label in (("api", "API only"), ("held", "loops on")):
        row(
            f"POST latency p50 / p99 (ms), {label}",
            each(
                lambda k, m=mode: (
                    f"{tmed[k][m]['post_p50_ms']:.0f} / {tmed[k][m]['post_p99_ms']:.0f}"
                )
            ),
        )
        row(
            f"server CPU per submission (ms), {label}",
            each(lambda k, m=mode: f"{tmed[k][m]['server_cpu_ms_per_submission']:.1f}"),
        )
    for name, params in LIST_QUERIES.items():
        query = "&".join(f"{k}={v}" for k, v in params.items())
        row(
            f"GET `?{query}` p50 / p99 (ms)",
            each(
                lambda k, n=name: (
                    f"{lst['by_database'][k]['queries'][n]['p50_ms']:.1f} / "
                    f"{lst['by_database'][k]['queries'][n]['p99_ms']:.1f}"
                )
            ),
            "",
            f"p99 < {target['list_p99_ms_max']:g}",
        )
    stalls = report["stalls"]
    first = stalls[kinds[0]]
    row(
        f"submit -> Running p50 / p99 (s) while {first['stalled']} stops of "
        f"{first['stop_s']:g} s each hang (stub backend)",
        each(lambda k: f"{stalls[k]['p50_s']:.3f} / {stalls[k]['p99_s']:.3f}"),
        "",
        f"p99 < {target['stalls_submit_to_running_p99_s_max']:g}",
    )
    flood = report["flood"]
    row(
        f"GET `?limit=50` p99 (ms): quiet / under a {flood[kinds[0]]['threads']}-thread "
        "wrong-secret token flood (ratio)",
        each(
            lambda k: (
                f"{flood[k]['quiet']['p99_ms']:.1f} / {flood[k]['flooded']['p99_ms']:.1f} "
                f"({flood[k]['p99_ratio']:.2f}x)"
            )
        ),
        "",
        f"ratio <= {target['list_p99_under_token_flood_ratio_max']:g}",
    )
    row(
        "GET `/healthz` p50 / p99 (ms): HTTP alone, the floor",
        each(
            lambda k: (
                f"{lst['by_database'][k]['queries']['healthz']['p50_ms']:.1f} / "
                f"{lst['by_database'][k]['queries']['healthz']['p99_ms']:.1f}"
            )
        ),
    )
    lines += [
        "",
        "Notes:",
        "",
        f"- Latency: {lat['workload']}; median of {report['args']['runs']} runs, alternating "
        "launch / "
        + " / ".join(names[k] for k in kinds)
        + " server, "
        + ("after one untimed run each (warm servers). " if report["args"]["warm"] else "cold. ")
        + "Times are from just before the POST, as a client polling every "
        f"{lat['poll_ms']} ms sees them; the loops' own stamps are in the JSON.",
        f"- Submissions: {thr['submissions']} POSTs from {thr['concurrency']} client threads "
        f"(httpx, keep-alive) on a fresh server and database per burst, median of "
        f"{thr['bursts']} bursts; every accepted workload is checked to be in the database. "
        "No workload runs: *API only* is the real app with its background loops not started "
        "(workloads stay Pending); *loops on* runs the loops against a backend that accepts "
        "each workload at once and keeps its pods Pending (a full cluster), so admission and "
        "per-tick polling write to the database during the burst.",
        "- Stalls: a server whose stub backend starts every workload at once (pods Running) "
        f"and takes {report['stalls'][kinds[0]]['stop_s']:g} s for each stop; "
        f"{report['stalls'][kinds[0]]['stalled']} workloads are deleted together, then "
        f"{report['stalls'][kinds[0]]['probes']} submissions are timed one by one from the POST "
        "until the API shows them Running (10 ms polling) while those stops are in flight.",
        f"- Big submissions: bursts of {thr['big_submissions']} POSTs, otherwise the same, "
        f"with a command of {thr['commands']['api_100kb']} (`python -c` of a long string "
        "literal), API only.",
        f"- Token flood: a server (loops off) with 60 Pending workloads; "
        f"{flood[kinds[0]]['requests_each']} sequential `GET ?limit=50` quiet and as many while "
        f"{flood[kinds[0]]['threads']} threads in another process POST /api/v1/token with the "
        "admin's client id and a wrong secret, interleaved in chunks of 25 (the flood flowing "
        "before a flooded chunk, gone before a quiet one). Flood answers: "
        + "; ".join(
            f"{names[k]} {flood[k]['flood_answers']} at {flood[k]['flood_answers_per_s']:.0f}/s"
            for k in kinds
        )
        + ". The flooding client shares the machine's cores with the server.",
        f"- Listing: {lst['rows']} finished workloads (Completed/Failed/Stopped, 2 pods and 5 "
        "events each) inserted through the server's models while it was stopped (PostgreSQL "
        f"then ANALYZEd); {lst['requests_per_query']} sequential requests per query, "
        "interleaved, after 10 warm-up requests each.",
        f"- Shared machine: each sample (a latency round, a burst, 50 rounds of GETs) waited "
        f"(at most {other['max_wait_s']:g} s) for idle CPUs and was measured again, up to "
        f"{other['tries']} times, while processes not started by the benchmark used more than "
        f"{other['max_other_cores']:g} cores meanwhile: {len(other['dropped'])} dropped, "
        f"{other['kept_over_max']} of {other['samples']} kept above that; other work during "
        f"kept samples: median {other['median_cores']:.2f}, max {other['max_cores']:.2f} cores. "
        "A fixed pure-Python loop took "
        f"{statistics.median(other['calibration_ms']):.0f} ms (median; min "
        f"{min(other['calibration_ms']):.0f}, max {max(other['calibration_ms']):.0f}) "
        "before the samples: the CPU's own speed varies on this VM.",
        "",
    ]
    return "\n".join(lines)
