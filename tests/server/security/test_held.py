"""What held when a hostile tenant tried it (issue 22), kept as a regression suite.

A researcher of another project, with a real account on a root server whose
workloads run as per-user OS accounts, reaches for a workload that is not
theirs through every route that names a workload, and through path syntax in
the ids and pod names those routes take.  Each answer must be the one an id
that does not exist gets: a 404 whose body says nothing of the workload (its
existence untold), never another project's data and never a 5xx.

The rest of the held list has its tests where the part lives: server files
and environment out of pods, reserved variables and cgroup escape
(tests/server/test_run_as.py), clean-up of ``setsid``/``env -i``/double-fork
processes (tests/server/backends/test_cgroups*.py), body and JSON bounds
(tests/server/test_input_bounds.py), token floods and client-id timing
(tests/server/test_tokens.py), XSS and CSRF in the UI (tests/server/ui/),
forged, expired and revoked tokens (tests/server/test_tokens.py,
tests/server/ui/test_session.py).
"""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture: site)

API = "/api/v1/workloads"
PATHS = ("{id}", "distributed/{id}", "{id}/pods", "{id}/events", "{id}/logs", "{id}/metrics")
ACTIONS = ("distributed/{id}/suspend", "distributed/{id}/resume")
TRAVERSALS = ("..", "../..", "..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e", "x/../../..", "%00")


def outsider(site: Site) -> tuple[str, str]:
    """A researcher of a project of their own, with no role in the default project."""
    name = f"mallory{uuid.uuid4().hex[:4]}"
    project = f"p{uuid.uuid4().hex[:6]}"
    made = site.server.cli("user", "create", name)
    assert made.returncode == 0, made.stderr
    assert site.server.cli("project", "create", project).returncode == 0
    assert site.server.cli("user", "assign", name, project).returncode == 0
    ids = re.search(r"Client ID:\s+(\S+)", made.stdout)
    secret = re.search(r"Client secret:\s+(\S+)", made.stdout)
    assert ids and secret, made.stdout
    return ids.group(1), secret.group(1)


@pytest.fixture(scope="module")
def victim(site: Site) -> str:
    """A running workload of a researcher in the default project; its id."""
    alice = site.user(f"alice{uuid.uuid4().hex[:4]}")
    name = f"secret-{uuid.uuid4().hex[:4]}"
    workload_id = site.submit(alice, name, "python", "-c", "print('alice-secret-output')")
    site.wait_logs(name, "alice-secret-output")
    return workload_id


def test_another_projects_workload_is_not_found_on_every_route(site: Site, victim: str) -> None:
    headers = {"Authorization": f"Bearer {site.token(outsider(site))}"}
    missing = str(uuid.uuid4())
    with httpx.Client(base_url=site.server.url, headers=headers, timeout=60) as http:
        for template in PATHS:
            theirs = http.get(f"{API}/{template.format(id=victim)}")
            nobodys = http.get(f"{API}/{template.format(id=missing)}")
            assert theirs.status_code == nobodys.status_code == 404, (template, theirs.text)
            assert theirs.text.replace(victim, missing) == nobodys.text, template
            assert "alice" not in theirs.text
        for template in ACTIONS:
            assert http.post(f"{API}/{template.format(id=victim)}").status_code == 404, template
        assert http.delete(f"{API}/distributed/{victim}").status_code == 404
        listed = http.get(API, params={"limit": "500"}).json()["workloads"]
        assert victim not in {w["workloadId"] for w in listed}
    assert site.server.cli("describe", victim).returncode == 0  # still there, untouched


def test_path_syntax_in_ids_and_pod_names_reaches_nothing(site: Site, victim: str) -> None:
    headers = {"Authorization": f"Bearer {site.token(outsider(site))}"}
    with httpx.Client(base_url=site.server.url, headers=headers, timeout=60) as http:
        for bad in TRAVERSALS:
            for template in PATHS:  # (a client may normalise "a/.." itself: then it is a list)
                answer = http.get(f"{API}/{template.format(id=bad)}")
                assert answer.status_code < 500, (bad, template, answer.text)
                assert "root:" not in answer.text and victim not in answer.text, (bad, template)
            pod = http.get(f"{API}/{victim}/logs", params={"pod": f"../../{bad}"})
            assert pod.status_code == 404, (bad, pod.status_code, pod.text)
