"""A standby server that takes over (issue 27, item 5), with real server processes on
a real PostgreSQL: election, what a standby answers, and a kill -9 of the active during
a stream of submissions from the real client (each accepted one stored exactly once,
the running workload adopted and finished under the new active)."""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from ringleader.errors import RingleaderError
from ringleader.server import db
from ringleader.spec import WorkloadSpec
from tests.conftest import wait_until
from tests.fixtures.postgres import pg_app_url, postgres_server  # noqa: F401
from tests.server.standby_pair import client_for, kill9, pair, role

SUBMISSIONS = 200
SENDERS = 4


def _token(home: Path, url: str) -> dict[str, str]:
    creds = json.loads((home / "credentials.json").read_text())
    body = {
        "grantType": "client_credentials",
        "clientID": creds["clientId"],
        "clientSecret": creds["clientSecret"],
    }
    token = httpx.post(f"{url}/api/v1/token", json=body, timeout=30).json()["accessToken"]
    return {"Authorization": f"Bearer {token}"}


def test_one_active_and_a_standby_that_reads_and_names_the_active(
    tmp_path: Path,
    pg_app_url: str,  # noqa: F811
) -> None:
    with pair(tmp_path, pg_app_url) as (a, b):
        assert {role(a.url), role(b.url)} == {"active", "standby"}
        assert httpx.get(f"{b.url}/healthz").json()["active"] == a.url
        headers = _token(a.home, a.url)  # tokens live in the database: B knows them
        project = httpx.get(f"{b.url}/api/v1/org-unit/projects/default", headers=headers)
        assert project.status_code == 200
        listed = httpx.get(f"{b.url}/api/v1/workloads", headers=headers)
        assert listed.status_code == 200
        body = {
            "name": "refused",
            "projectId": project.json()["id"],
            "spec": {"command": "true", "numWorkers": 1},
        }
        refused = httpx.post(f"{b.url}/api/v1/workloads/distributed", json=body, headers=headers)
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "1"
        assert refused.headers["X-Ringleader-Role"] == "standby"
        assert refused.headers["X-Ringleader-Active"] == a.url
        assert "standby" in refused.json()["message"] and a.url in refused.json()["message"]
        # The token endpoint writes too: a standby sends it to the active.
        assert httpx.post(f"{b.url}/api/v1/token", json={}).status_code == 503
        # And the real client, pointed at the standby first, lands on the active.
        accepted = client_for(a.home, b.url, a.url).submit_distributed(_spec("via-standby"))
        names = {w.name for w in client_for(a.home, b.url).list_workloads().workloads}
        assert "via-standby" in names and accepted.name == "via-standby"
        assert "refused" not in names


def _spec(name: str, *, gpus: int | None = 2, command: str = "true") -> WorkloadSpec:
    """Two GPUs on the one 1-GPU simulated node: accepted, then Pending for good (the
    stream tests the write path, not 200 runs on a 2-core machine)."""
    compute = {"gpuDevicesRequest": gpus} if gpus else {}
    return WorkloadSpec.model_validate(
        {"name": name, "projectId": "default", "spec": {"command": command, "numWorkers": 1,
                                                        "compute": compute}}
    )  # fmt: skip


def _stored(url: str) -> list[tuple[str, str, str]]:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT id, name, idempotency_key FROM workloads WHERE name LIKE 'w-%'")
            ).all()
        return [(r[0], r[1], r[2]) for r in rows]
    finally:
        engine.dispose()


def test_kill_9_of_the_active_during_submissions(tmp_path: Path, pg_app_url: str) -> None:  # noqa: F811
    release = tmp_path / "release"
    with pair(tmp_path, pg_app_url) as (a, b):
        client = client_for(a.home, a.url, b.url)
        waits = shlex.join(["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.2; done"])
        running = client.submit_distributed(_spec("long", gpus=None, command=waits))
        wait_until(
            lambda: client.workload(running.workload_id).actual_phase == "Running", 120, "Running"
        )
        run_dir = a.home / "runs" / running.workload_id
        supervisor = json.loads((run_dir / "state.json").read_text())["pid"]

        accepted: dict[str, str] = {}
        failed: list[str] = []
        lock = threading.Lock()

        def send(first: int) -> None:
            mine = client_for(a.home, a.url, b.url)
            for i in range(first, SUBMISSIONS, SENDERS):
                try:
                    got = mine.submit_distributed(_spec(f"w-{i}"))
                except RingleaderError as exc:
                    with lock:
                        failed.append(f"w-{i}: {exc}")
                    continue
                with lock:
                    accepted[f"w-{i}"] = got.workload_id

        senders = [threading.Thread(target=send, args=(k,)) for k in range(SENDERS)]
        for sender in senders:
            sender.start()
        wait_until(lambda: len(accepted) >= SUBMISSIONS // 4, 120, "a quarter accepted")
        assert _alive(supervisor)
        kill9(a)
        assert _alive(supervisor), "died with A"
        for sender in senders:
            sender.join(timeout=300)
        assert failed == []
        assert len(accepted) == SUBMISSIONS
        wait_until(lambda: role(b.url) == "active", 60, "b active")

        stored = _stored(pg_app_url)
        keys = [key for _id, _name, key in stored]
        assert len(stored) == SUBMISSIONS and None not in keys and len(set(keys)) == SUBMISSIONS
        assert {name: wid for wid, name, _key in stored} == accepted

        # The workload A started runs on: its supervisor never stopped; B adopts it.
        events = [(e.type, e.message, e.to_phase) for e in client.events(running.workload_id)]
        assert _alive(supervisor), events
        release.touch()
        wait_until(
            lambda: client.workload(running.workload_id).actual_phase == "Completed",
            120,
            "Completed under the new active",
        )
        assert client.url == b.url


def _alive(pid: int) -> bool:
    try:
        import os

        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("args", "named", "says"),
    [
        (("--ha",), "--ha", "PostgreSQL"),  # SQLite (the default): no standby
        (("--db", "mysql://db/rl"), "--db", "postgresql+psycopg://"),
        (("--db", "postgresql+psycopg://x/y", "--advertise-url", "a:1"), "--advertise-url", "http"),
        (("--lease-ttl", "0.1"), "--lease-ttl", "0.1"),
    ],
)
def test_bad_standby_options_are_refused_naming_the_option(
    tmp_path: Path, args: tuple[str, ...], named: str, says: str
) -> None:
    from tests.server.conftest import ServerProcess

    server = ServerProcess(tmp_path / "home")
    done = server.cli("server", "--port", str(server.port), "--run-as", "server", *args)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and says in done.stderr and "Traceback" not in done.stderr
    assert role(server.url) is None  # nothing started
