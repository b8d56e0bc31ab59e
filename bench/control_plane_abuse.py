"""Abuse benchmark: /healthz and another user's list while a tenant attacks the server.

Standalone (``python bench/control_plane_abuse.py``): one real ``ringleader
server`` per database (SQLite, PostgreSQL), its loops and local backend on.
A researcher, mallory, in a project of her own, runs each attack of
bench/abuse_attacks.py in turn (a token flood, 2.9 MB bodies, 200k-key specs,
150 follows, 200 half-sent headers, metrics reads of 180 MB of files her
workload wrote); meanwhile the admin, another user, times ``GET /healthz`` and
``GET /api/v1/workloads`` sequentially, in chunks alternately quiet and under
the attack. Figure: p99 under attack / p99 quiet, same server, same run.
Target: within 1.5x for each attack and endpoint (issue 22). Writes
bench/results/control_plane_abuse.json and .md (not with --quick).

Where the attacker runs: in her own pod, as the threat model's tenant with a shell
there would. Her workloads ask for POD_COMPUTE (half a core, at most one); each
attack process joins the cgroups of her sleeper's rank (found by the pid it
prints), so it gets the CPU her pod gets, no more. Where the server made no pod
cgroups (not root, no cgroupfs) the attacker runs beside the server, and the report
says so (``attacker_in``).

Also the abuse phases of bench/control_plane.py: a token flood, and big submissions.

flood: a server with its loops off (``api`` mode) holds --flood-workloads
Pending workloads; ``GET /api/v1/workloads?limit=50`` is timed sequentially
in chunks of 25, alternately quiet and while FLOOD_THREADS client threads
POST ``/api/v1/token`` with the admin's client id and a wrong secret as fast
as the server answers (each thread its own keep-alive connection). The
flooding threads live in a process of their own (abuse_attacks.py's
``token_flood``), so they do not share the timing client's interpreter lock.
The flood is running (a first answer seen on every thread) before a flooded
chunk starts and is stopped (every thread joined, the process gone) before a
quiet one. Figure: p99
while flooded / p99 quiet, same server, same run. Target: within 1.5x (a
wrong secret must not cost the server more than a bounded, rate-limited
check; a key derivation per attempt on every thread lets the flood take the
CPU from the readers).

big submissions: the throughput phase's burst with a ~32 KB command (the most a command may hold)
(``big_command``: ``python -c`` of a long string literal, a valid command
the server stores and would run), next to the normal burst's figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from abuse_attacks import ATTACKS

FLOOD_THREADS = 16
TARGET_FLOOD_RATIO = 1.5
BIG_COMMAND_BYTES = 32 * 1024  # the most a command may hold (spec_limits.MAX_COMMAND_CHARS)
CHUNK = 25  # GETs per quiet or flooded stretch
RESULTS = Path(__file__).resolve().parent / "results"
CONTROL = "busy"  # the control attack: a core spun, nothing sent (abuse_attacks.busy)
POD_COMPUTE = {"cpuCoreRequest": 0.5, "cpuCoreLimit": 1.0}  # mallory's pods
CGROUP_ROOT = Path("/sys/fs/cgroup")
SLEEPER = "import os, time; print('POD-PID', os.getpid(), flush=True); time.sleep(3600)"


def big_command(size: int = BIG_COMMAND_BYTES) -> str:
    """A valid command line of exactly ``size`` characters (ASCII)."""
    head, tail = "python -c \"s = '", "'; print(len(s))\""
    return head + "x" * (size - len(head) - len(tail)) + tail


def timed_gets(server: Any, count: int, params: dict[str, str]) -> list[float]:
    """Milliseconds for each of ``count`` sequential list requests (a full page each)."""
    got = []
    for _ in range(count):
        t = time.perf_counter()
        response = server.request("GET", "/api/v1/workloads", params=params)
        elapsed = time.perf_counter() - t
        if response.status_code != 200 or len(response.json()["workloads"]) != 50:
            raise RuntimeError(f"GET {params}: {response.status_code} {response.text[:300]}")
        got.append(elapsed * 1000)
    return got


def list_under_flood(
    server: Any, client_id: str, requests: int, percentile: Any, clean: Any
) -> dict[str, Any]:
    """Quiet and flooded list latencies, interleaved in chunks; their p99 ratio."""
    params = {"limit": "50"}
    timed_gets(server, 10, params)  # warm-up
    quiet: list[float] = []
    flooded: list[float] = []
    flood_s = 0.0
    statuses: Counter[str] = Counter()
    for first in range(0, requests, CHUNK):
        n = min(CHUNK, requests - first)
        quiet += clean("flood: quiet", lambda n=n: timed_gets(server, n, params))[0]
        flood = AttackProcess("token_flood", server.url, client_id)
        try:
            flooded += timed_gets(server, n, params)
        finally:
            seen = flood.stop()
        flood_s += seen["seconds"]
        statuses.update(seen["statuses"])
    quiet_p99, flooded_p99 = percentile(quiet, 99), percentile(flooded, 99)
    return {
        "threads": FLOOD_THREADS,
        "requests_each": requests,
        "quiet": {"p50_ms": percentile(quiet, 50), "p99_ms": quiet_p99, "max_ms": max(quiet)},
        "flooded": {
            "p50_ms": percentile(flooded, 50),
            "p99_ms": flooded_p99,
            "max_ms": max(flooded),
        },
        "p99_ratio": flooded_p99 / quiet_p99,
        "meets_target": flooded_p99 / quiet_p99 <= TARGET_FLOOD_RATIO,
        "flood_answers": dict(sorted(statuses.items())),
        "flood_answers_per_s": sum(statuses.values()) / flood_s if flood_s else float("nan"),
        "flood_got_a_token": statuses.get("200", 0),  # a wrong secret must never get one
    }


# ----- standalone: every attack of abuse_attacks.py against one real server per database ----
TARGET_RATIO = 1.5
ENDPOINTS = {"healthz": "/healthz", "list": "/api/v1/workloads"}
METRICS_FILES, METRICS_FILE_MB = 3, 60  # 180 MB: the 182 MB
WRITE_METRICS = f"""
import json, os, time
if os.environ.get("RANK") == "0":
    line = (json.dumps({{"step": 1, "time": time.time(), "loss": 0.5, "samples": 8}}) + "\\n")
    for i in range({METRICS_FILES}):
        path = os.path.join(os.environ["RINGLEADER_METRICS_DIR"], f"rank-{{i}}.attempt-0.jsonl")
        with open(path, "w") as f:
            f.write(line * ({METRICS_FILE_MB} * 1024 * 1024 // len(line)))
    print("METRICS-WRITTEN", flush=True)
time.sleep(3600)
"""


class AttackProcess:
    """An attack of abuse_attacks.py in a child process: in effect, then stopped."""

    def __init__(
        self, name: str, url: str, arg: str, quick: bool = False, pod: list[Path] | None = None
    ) -> None:
        """``pod``: the ``cgroup.procs`` files of the attacker's pod, which the process
        joins before it has done anything (threads it starts later stay there)."""
        script = Path(__file__).resolve().parent / "abuse_attacks.py"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), name, url, arg, *(["quick"] if quick else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for procs in pod or []:
            procs.write_text(f"{self.proc.pid}\n")
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"attack {name} did not start")

    def stop(self) -> dict[str, Any]:
        out, _ = self.proc.communicate("stop\n", timeout=300)
        return json.loads(out.strip().splitlines()[-1])


def timed(server: Any, path: str, count: int) -> tuple[list[float], int]:
    """Milliseconds of ``count`` sequential GETs of ``path`` as the admin, and how many
    failed (an error answer or no answer in 60 s counts with the time it took)."""
    got, failed = [], 0
    params = {"limit": "50"} if "workloads" in path else {}
    for _ in range(count):
        t = time.perf_counter()
        try:
            ok = server.request("GET", path, params=params).status_code == 200
        except httpx.HTTPError:
            ok = False
        got.append((time.perf_counter() - t) * 1000)
        failed += not ok
    return got, failed


def cli(server: Any, *args: str) -> str:
    env = {**os.environ, "RINGLEADER_HOME": str(server.home), "RINGLEADER_URL": server.url}
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"ringleader {' '.join(args)}: {done.stderr}")
    return done.stdout


def pod_cgroups(pid: int) -> list[Path]:
    """The ``cgroup.procs`` files that put a process where ``pid`` is: one per v1
    hierarchy (mounted under its controllers' names), or the v2 one; none where
    ``pid`` sits in the root (no pod cgroups on this host)."""
    files = []
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers.startswith("name=") or path == "/":
            continue
        procs = CGROUP_ROOT / controllers / path.lstrip("/") / "cgroup.procs"
        if procs.exists():
            files.append(procs)
    return files


def attacker(server: Any, names: list[str]) -> tuple[dict[str, str], list[Path]]:
    """Mallory: a researcher of her own project, her token, her two workloads (one that
    only sleeps, for follows and for its pod's cgroups; one that wrote 180 MB of
    metrics files, only when the ``metrics`` attack is among ``names``); each
    attack's argument, and her pod's cgroups (``pod_cgroups``)."""
    made = cli(server, "user", "create", "mallory")
    creds = {k: re.search(rf"{k}:\s+(\S+)", made).group(1) for k in ("Client ID", "Client secret")}  # type: ignore[union-attr]
    cli(server, "project", "create", "abuse")
    cli(server, "user", "assign", "mallory", "abuse", "--role", "researcher")
    token = httpx.post(
        f"{server.url}/api/v1/token",
        json={
            "grantType": "client_credentials",
            "clientID": creds["Client ID"],
            "clientSecret": creds["Client secret"],
        },
    ).json()["accessToken"]
    headers = {"Authorization": f"Bearer {token}"}
    project = server.get("/api/v1/org-unit/projects/abuse")["id"]

    def submit(name: str, command: list[str]) -> str:
        body = {"name": name, "projectId": project, "spec": {"command": shlex.join(command)}}
        body["spec"]["numWorkers"] = 1
        body["spec"]["compute"] = POD_COMPUTE
        response = httpx.post(
            f"{server.url}/api/v1/workloads/distributed", json=body, headers=headers
        )
        response.raise_for_status()
        return response.json()["workloadId"]

    def logged(workload: str, pattern: str, timeout: float = 600) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        logs = f"/api/v1/workloads/{workload}/logs"
        while not (found := re.search(pattern, server.request("GET", logs).text)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workload} never printed {pattern!r}")
            time.sleep(0.5)
        return found

    sleeper = submit("sleeper", [sys.executable, "-c", SLEEPER])
    pod = pod_cgroups(int(logged(sleeper, r"POD-PID (\d+)").group(1)))
    writer = "-"
    if "metrics" in names:
        writer = submit("writer", [sys.executable, "-c", WRITE_METRICS])
        logged(writer, "METRICS-WRITTEN")
    arguments = {
        "token_flood": json.loads((server.home / "credentials.json").read_text())["clientId"],
        "big_body": "-",
        "many_keys": f"{token} {project}",
        "follows": f"{token} {sleeper}",
        "half_open": "-",
        "metrics": f"{token} {writer}",
        "busy": "-",
    }
    return arguments, pod


def under_attack(
    server: Any,
    name: str,
    arg: str,
    requests: int,
    percentile: Any,
    quick: bool = False,
    pod: list[Path] | None = None,
) -> dict[str, Any]:
    """Both endpoints quiet and attacked, interleaved in two chunks each; p99 ratios."""
    quiet: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    attacked: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    failed: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    half = max(1, requests // 2)
    for _ in range(2):
        for endpoint, path in ENDPOINTS.items():
            got, errors = timed(server, path, half)
            quiet[endpoint] += got
            failed[f"{endpoint} quiet"] += errors
        attack = AttackProcess(name, server.url, arg, quick, pod)
        try:
            for endpoint, path in ENDPOINTS.items():
                got, errors = timed(server, path, half)
                attacked[endpoint] += got
                failed[f"{endpoint} attacked"] += errors
        finally:
            answers.update(attack.stop()["statuses"])
    out: dict[str, Any] = {"attacker_answers": dict(sorted(answers.items()))}
    for endpoint in ENDPOINTS:
        q, a = percentile(quiet[endpoint], 99), percentile(attacked[endpoint], 99)
        out[endpoint] = {
            "quiet_p50_ms": percentile(quiet[endpoint], 50),
            "quiet_p99_ms": q,
            "attacked_p50_ms": percentile(attacked[endpoint], 50),
            "attacked_p99_ms": a,
            "p99_ratio": a / q,
            "failed": failed[f"{endpoint} quiet"] + failed[f"{endpoint} attacked"],
            "meets_target": a / q <= TARGET_RATIO and not failed[f"{endpoint} attacked"],
        }
    return out


def table(report: dict[str, Any]) -> str:
    lines = [
        "# Control plane under abuse (bench/control_plane_abuse.py)",
        "",
        f"{report['date']}, {report['machine']}; {report['requests']} GETs per endpoint "
        "quiet and as many under each attack, interleaved; target: p99 under attack within "
        f"{TARGET_RATIO}x of quiet. `busy` is the control: one core spun by a process "
        "that sends nothing, what any attacker on this machine costs by being here. "
        f"The attacker runs in {', '.join(f'{k}: {v}' for k, v in report['attacker_in'].items())}, "
        f"which ask for {POD_COMPUTE}. `vs busy`: attacked p99 / p99 beside the control, "
        "what the attack costs beyond any process's presence.",
        "",
        "| database | attack | /healthz p99 quiet / attacked (ms) | ratio | vs busy | "
        "list p99 quiet / attacked (ms) | ratio | vs busy | failed GETs | attacker's answers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def vs(r: dict[str, Any]) -> str:
        return f"{r['p99_vs_control']:.2f}x" if "p99_vs_control" in r else "-"

    for kind, attacks in report["results"].items():
        for name, r in attacks.items():
            h, li = r["healthz"], r["list"]
            lines.append(
                f"| {kind} | {name} | {h['quiet_p99_ms']:.1f} / {h['attacked_p99_ms']:.1f} | "
                f"{h['p99_ratio']:.2f}x | {vs(h)} | "
                f"{li['quiet_p99_ms']:.1f} / {li['attacked_p99_ms']:.1f} | "
                f"{li['p99_ratio']:.2f}x | {vs(li)} | {h['failed'] + li['failed']} | "
                + ", ".join(f"{k}: {v}" for k, v in r["attacker_answers"].items())
                + " |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    from bench_quiet import percentile
    from bench_server import Databases, Server

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--databases", default="sqlite,postgresql", help="sqlite,postgresql")
    parser.add_argument("--requests", type=int, default=100, help="GETs per endpoint and state")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20 GETs each, a sixth of the held connections; writes nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.requests = 20
    kinds = [k for k in args.databases.split(",") if k]
    names = [a for a in args.attacks.split(",") if a]
    if unknown := [a for a in names if a not in ATTACKS]:
        parser.error(f"--attacks: unknown {', '.join(unknown)} (known: {', '.join(ATTACKS)})")
    # SIGTERM/SIGHUP (a timeout) end the run through the finally below: no server left.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    tmp = Path(tempfile.mkdtemp(prefix="ringleader-bench-abuse-"))
    dbs = Databases(tmp, kinds)
    report: dict[str, Any] = {
        "benchmark": "control_plane_abuse",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "requests": args.requests,
        "loadavg_before": os.getloadavg(),
        "results": {},
    }
    try:
        dbs.start()
        for kind in kinds:
            home, url, _ = dbs.fresh(kind, "abuse")
            server = Server(home, url, "real")
            server.start()
            try:
                arguments, pod = attacker(server, names)
                report.setdefault("attacker_in", {})[kind] = (
                    "her pod's cgroups" if pod else "the server's cgroup (no pod cgroups)"
                )
                for name in names:
                    result = under_attack(
                        server, name, arguments[name], args.requests, percentile, args.quick, pod
                    )
                    report["results"].setdefault(kind, {})[name] = result
                    print(
                        f"{kind} {name}: healthz x{result['healthz']['p99_ratio']:.2f}, "
                        f"list x{result['list']['p99_ratio']:.2f}, {result['attacker_answers']}",
                        flush=True,
                    )
            finally:
                server.stop()
    finally:
        dbs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report["loadavg_after"] = os.getloadavg()
    for attacks in report["results"].values():
        if CONTROL in attacks:
            for r in attacks.values():
                for e in ENDPOINTS:
                    r[e]["p99_vs_control"] = (
                        r[e]["attacked_p99_ms"] / attacks[CONTROL][e]["attacked_p99_ms"]
                    )
    report["meets_target"] = all(
        r[e]["meets_target"]
        for a in report["results"].values()
        for name, r in a.items()
        for e in ENDPOINTS
        if name != CONTROL
    )
    text = table(report)
    print(text)
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "control_plane_abuse.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "control_plane_abuse.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
