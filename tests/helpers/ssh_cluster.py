"""A server process driven as the SSH-node tests drive it: an API client with the
admin's token, and the test hosts imported as its SSH nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.testhosts import TestHostNetwork
from tests.helpers.phases import actual_phase, stayed, wait_phase
from tests.server.conftest import ServerProcess


class Server(ServerProcess):
    """The server process with an API client holding the admin's token."""

    def start(self) -> None:
        super().start()
        creds = json.loads((self.home / "credentials.json").read_text())
        token = httpx.post(
            f"{self.url}/api/v1/token",
            json={"clientID": creds["clientId"], "clientSecret": creds["clientSecret"]},
        ).json()["accessToken"]
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def node(self, name: str) -> dict[str, Any]:
        return self.http.get(f"/api/v1/nodes/{name}").json()

    def workload(self, wid: str) -> dict[str, Any]:
        return self.http.get(f"/api/v1/workloads/{wid}").json()

    def submit(self, name: str, cwd: Path, command: str, workers: int = 2, **spec: Any) -> str:
        project = self.http.get("/api/v1/org-unit/projects/default").json()["id"]
        body = {
            "name": name,
            "projectId": project,
            "spec": {
                "command": command,
                "numWorkers": workers,
                "workingDir": str(cwd),
                "compute": {"cpuCoreRequest": 0.75},
                **spec,
            },
        }
        response = self.http.post("/api/v1/workloads/distributed", json=body)
        assert response.status_code in (200, 201, 202), response.text
        return response.json()["workloadId"]

    def wait_phase(self, wid: str, phases: set[str], timeout: float = 120) -> dict[str, Any]:
        try:
            return wait_phase(lambda: self.workload(wid), actual_phase, phases, timeout, stayed)
        except AssertionError as exc:  # say where it stayed, and why
            events = self.http.get(f"/api/v1/workloads/{wid}/events").json()["events"]
            raise AssertionError(f"{exc}: {self.workload(wid)}\n{events}") from None


def hosts_json(net: TestHostNetwork, path: Path, *extra: str) -> Path:
    entries = [{"ssh": h.address, "ips": [h.address]} for h in net.hosts]
    entries += [{"ssh": address, "ips": [address]} for address in extra]
    path.write_text(json.dumps(entries))
    return path


def import_hosts(server: Server, net: TestHostNetwork, tmp_path: Path) -> None:
    done = server.cli("nodes", "import", str(hosts_json(net, tmp_path / "h.json")))
    assert done.returncode == 0, done.stdout + done.stderr
