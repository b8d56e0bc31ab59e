"""Issue 27, item 5: how long a standby takes to take over from a killed active.

Two ``ringleader server`` processes on one PostgreSQL (``--lease-ttl``, default 3 s:
renewed every second), the first active, the second its standby. Per round:

- ``takeover``: 200 submissions (plain distributed workloads kept Pending: two GPUs
  asked of a 1-GPU simulated node) from 4 threads of the real ringleader client, given
  both URLs; once a quarter is accepted the active gets SIGKILL. Measured: from the
  kill to the standby's ``/healthz`` saying ``active`` (polled every 20 ms), and the
  clients' gap: the longest wait between two accepted submissions. Checked: every
  submission accepted, each stored exactly once (by its Idempotency-Key).
- ``restart`` (the peer, no standby): one server killed the same way and started again
  at once on the same home: from the kill to it answering as active.
- ``handover``: the active stopped with SIGTERM (it hands its lease back): from the
  signal to the standby being active.

The machine is shared: ``uptime``'s load averages are recorded with each round.
Writes bench/results/standby.json and .md (not with --quick).

Usage: python bench/standby.py [--rounds 3] [--lease-ttl 3]
       python bench/standby.py --quick
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_quiet import code_version  # noqa: E402
from ringleader.client import Client  # noqa: E402
from ringleader.errors import RingleaderError  # noqa: E402
from ringleader.spec import WorkloadSpec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SUBMISSIONS = 200
SENDERS = 4


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def role(url: str) -> str | None:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).json().get("role")
    except (httpx.HTTPError, ValueError):
        return None


def wait_for(cond: Any, timeout: float, what: str, step: float = 0.02) -> float:
    """Poll ``cond`` until true; the monotonic time it first was."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return time.monotonic()
        time.sleep(step)
    raise SystemExit(f"timed out waiting for {what}")


class Server:
    def __init__(self, home: Path, db_url: str, ttl: float, port: int | None = None) -> None:
        self.home, self.db_url, self.ttl = home, db_url, ttl
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.home / "server.log", "ab")  # noqa: SIM115
        env = {**os.environ, "RINGLEADER_HOME": str(self.home), "RINGLEADER_URL": self.url}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ringleader", "server", "--port", str(self.port),
             "--run-as", "server", "--db", self.db_url, "--lease-ttl", str(self.ttl),
             "--simulate-nodes", "1x1gpu"],
            env=env, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=60)

    def client(self, *urls: str) -> Client:
        creds = json.loads((self.home / "credentials.json").read_text())
        return Client(",".join(urls), creds["clientId"], creds["clientSecret"], "default")


def spec(name: str) -> WorkloadSpec:
    return WorkloadSpec.model_validate(
        {"name": name, "projectId": "default",
         "spec": {"command": "true", "numWorkers": 1, "compute": {"gpuDevicesRequest": 2}}}
    )  # fmt: skip


def stored_once(db_url: str) -> tuple[int, int]:
    """(workloads stored, distinct idempotency keys among them)."""
    import psycopg

    dsn = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT idempotency_key) FROM workloads WHERE name LIKE 'w-%'"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def takeover(tmp: Path, db_url: str, ttl: float) -> dict[str, Any]:
    a, b = Server(tmp / "a", db_url, ttl), Server(tmp / "b", db_url, ttl)
    try:
        a.start()
        wait_for(lambda: role(a.url) == "active", 120, "a active")
        b.start()
        wait_for(lambda: role(b.url) == "standby", 120, "b standby")
        accepted: list[float] = []
        failed: list[str] = []
        lock = threading.Lock()

        def send(first: int) -> None:
            client = a.client(a.url, b.url)
            for i in range(first, SUBMISSIONS, SENDERS):
                try:
                    client.submit_distributed(spec(f"w-{i}"))
                except RingleaderError as exc:
                    with lock:
                        failed.append(str(exc))
                    continue
                with lock:
                    accepted.append(time.monotonic())

        threads = [threading.Thread(target=send, args=(k,)) for k in range(SENDERS)]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(accepted) >= SUBMISSIONS // 4, 300, "a quarter accepted")
        before = load()
        killed = time.monotonic()
        a.signal(signal.SIGKILL)
        active = wait_for(lambda: role(b.url) == "active", 120, "b active")
        for thread in threads:
            thread.join(timeout=300)
        times = sorted(accepted)
        stored, keys = stored_once(db_url)
        return {
            "takeover_s": round(active - killed, 3),
            # The clients' outage: the longest wait between two accepted submissions.
            "client_gap_s": round(max(b - a for a, b in itertools.pairwise(times)), 3),
            "accepted": len(accepted),
            "failed": len(failed),
            "stored": stored,
            "distinct_keys": keys,
            "load_before": before,
            "load_after": load(),
        }
    finally:
        a.signal(signal.SIGKILL)
        b.signal(signal.SIGKILL)


def restart(tmp: Path, db_url: str, ttl: float) -> dict[str, Any]:
    a = Server(tmp / "r", db_url, ttl)
    try:
        a.start()
        wait_for(lambda: role(a.url) == "active", 120, "r active")
        before = load()
        killed = time.monotonic()
        a.signal(signal.SIGKILL)
        a.start()
        active = wait_for(lambda: role(a.url) == "active", 120, "r active again")
        return {"restart_s": round(active - killed, 3), "load_before": before,
                "load_after": load()}  # fmt: skip
    finally:
        a.signal(signal.SIGKILL)


def handover(tmp: Path, db_url: str, ttl: float) -> dict[str, Any]:
    a, b = Server(tmp / "ha", db_url, ttl), Server(tmp / "hb", db_url, ttl)
    try:
        a.start()
        wait_for(lambda: role(a.url) == "active", 120, "a active")
        b.start()
        wait_for(lambda: role(b.url) == "standby", 120, "b standby")
        before = load()
        stopped = time.monotonic()
        assert a.proc is not None
        a.proc.send_signal(signal.SIGTERM)
        active = wait_for(lambda: role(b.url) == "active", 120, "b active")
        a.proc.wait(timeout=60)
        return {"handover_s": round(active - stopped, 3), "load_before": before,
                "load_after": load()}  # fmt: skip
    finally:
        a.signal(signal.SIGKILL)
        b.signal(signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lease-ttl", type=float, default=3.0)
    parser.add_argument("--quick", action="store_true", help="one round, no results written")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    from tests.fixtures.postgres import PostgresServer, postgres_bindir

    bindir = postgres_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries are missing (apt: postgresql)")
    pg = PostgresServer(bindir)
    tmp = Path(tempfile.mkdtemp(prefix="rl-standby-bench-"))
    out: dict[str, Any] = {"rounds": [], "lease_ttl_s": args.lease_ttl,
                           "renew_s": round(args.lease_ttl / 3, 3), **code_version()}  # fmt: skip
    try:
        pg.init()
        pg.start()
        for n in range(rounds):
            row: dict[str, Any] = {"round": n + 1}
            for name, measure in (("takeover", takeover), ("restart", restart),
                                  ("handover", handover)):  # fmt: skip
                db = f"standby_{name}_{n}_{uuid.uuid4().hex[:6]}"
                pg.admin(f'CREATE DATABASE "{db}"')
                row[name] = measure(tmp / f"{name}-{n}", pg.url(db), args.lease_ttl)
                print(name, json.dumps(row[name]), flush=True)
            out["rounds"].append(row)
    finally:
        pg.stop()
        for home in tmp.rglob("runs"):
            _stop_runs(home)
        shutil.rmtree(tmp, ignore_errors=True)
    summary(out)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "standby.json").write_text(json.dumps(out, indent=2) + "\n")
        (RESULTS / "standby.md").write_text(markdown(out))
    print(markdown(out))


def _stop_runs(runs: Path) -> None:
    """The benchmark's workloads never run (Pending); nothing to stop but be sure."""
    from ringleader.server.backends.local import LocalBackend

    backend = LocalBackend(grace_s=1.0)
    for run_dir in runs.glob("*"):
        backend.cancel(str(run_dir))


def summary(out: dict[str, Any]) -> None:
    def median(kind: str, key: str) -> float | None:
        values = [r[kind][key] for r in out["rounds"] if r[kind].get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    out["median"] = {
        "takeover_s": median("takeover", "takeover_s"),
        "client_gap_s": median("takeover", "client_gap_s"),
        "restart_s": median("restart", "restart_s"),
        "handover_s": median("handover", "handover_s"),
    }
    take, again = out["median"]["takeover_s"], out["median"]["restart_s"]
    out["median"]["takeover_vs_restart"] = round(take / again, 2) if take and again else None
    out["exactly_once"] = all(
        r["takeover"]["accepted"]
        == r["takeover"]["stored"]
        == r["takeover"]["distinct_keys"]
        == SUBMISSIONS
        and r["takeover"]["failed"] == 0
        for r in out["rounds"]
    )


def markdown(out: dict[str, Any]) -> str:
    lines = [
        f"# Standby take-over (lease TTL {out['lease_ttl_s']:g} s, renewed every "
        f"{out['renew_s']:g} s)",
        "",
        "| round | kill -9 -> standby active (s) | clients' gap (s) | accepted / stored / "
        "distinct keys | restart, no standby (s) | SIGTERM handover (s) | load before -> after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in out["rounds"]:
        t, s, h = r["takeover"], r["restart"], r["handover"]
        lines.append(
            f"| {r['round']} | {t['takeover_s']} | {t['client_gap_s']} | {t['accepted']} / "
            f"{t['stored']} / {t['distinct_keys']} | {s['restart_s']} | {h['handover_s']} | "
            f"{t['load_before']} -> {h['load_after']} |"
        )
    m = out["median"]
    lines += [
        "",
        f"Median: take-over {m['takeover_s']} s (target 5 s), clients' gap {m['client_gap_s']} s,"
        f" restart without a standby {m['restart_s']} s (take-over / restart "
        f"{m['takeover_vs_restart']}x), handover on SIGTERM {m['handover_s']} s. "
        f"Every accepted submission stored exactly once: {out['exactly_once']}.",
        "",
        f"Commit {out['commit'][:10]}; command: `python bench/standby.py --rounds "
        f"{len(out['rounds'])} --lease-ttl {out['lease_ttl_s']:g}`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
