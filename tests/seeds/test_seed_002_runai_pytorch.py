"""Seed 002 (Run:ai's "Run your First Distributed Training"), every tab as printed.

An admin makes the prerequisites on the server's machine (a project ``team-a`` with
a GPU of quota, a researcher ``alice`` with her access key); alice works from her own
``RINGLEADER_HOME`` (her machine) and pastes each tab into bash, ``runai`` ->
``ringleader``, placeholders filled (``"project-name"`` -> ``team-a``, each tab's
``"workload-name"`` its own name). What each gets:

- Step 1, CLI V1 ``ringleader login``: prompted for the access key's id and secret
  (Run:ai asks a user name and password; ringleader logs in with access keys), the
  secret unechoed; CLI V2 ``ringleader login --help``: the login options.
- User interface: the ``pytorch-dt`` environment and ``small-fraction`` compute
  resource made with ``ringleader environment|compute create`` and named at submit
  with 2 workers; CLI V1 as printed; each starts one master and two workers running
  the image's stand-in.
- CLI V2 as printed lacks the backslash after ``--workers 2``: bash submits the
  first two lines alone (no GPU requested) and then runs ``--gpu-request-type ...``
  as a command of its own (``command not found``, exit 127). With the backslash the
  request flags land in the spec (a portion of 0.1 of one device, 100M).
- API: the token by Run:ai's client-credentials request, ``<PROJECT-ID>`` from
  ``GET /api/v1/org-unit/projects``, ``<CLUSTER-UUID>`` from ``GET /api/v1/clusters``
  (needs the ``runapi`` branch). ``https://<COMPANY-URL>`` is the server's URL,
  plain HTTP (ringleader has no TLS of its own). With only the annotations ``# (1)``
  .. ``# (4)`` removed (each breaks the shell: ``\\ #`` is an escaped space, then a
  word; ``'\\`` at (3) closes the body's quote), the body still has two stray
  backslashes (after ``"numWorkers": 2,`` and ``"PyTorch"``): it is not JSON, the
  server answers 422 and nothing is created. Without them too it is accepted (202).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.terminal import Terminal
from tests.seeds.usershell import UserShell, user_path
from tests.server.conftest import ServerProcess, stop_workloads

# Each tab's snippet verbatim (the page's 4-space tab indent removed, trailing spaces kept).
CLI_V1 = (
    'runai config project "project-name"  \n'
    'runai submit-dist pytorch "workload-name" --workers=2 -g 0.1 \\\n'
    "   -i kubeflow/pytorch-dist-mnist:latest"
)
CLI_V2 = (
    'runai project set "project-name"\n'
    'runai distributed submit "workload-name" --framework PyTorch \\\n'
    "   -i kubeflow/pytorch-dist-mnist:latest --workers 2 \n"
    "   --gpu-request-type portion --gpu-portion-request 0.1 --gpu-devices-request 1"
    " --cpu-memory-request 100M"
)
API = """\
curl -L 'https://<COMPANY-URL>/api/v1/workloads/distributed' \\ # (1)
-H 'Content-Type: application/json' \\
-H 'Authorization: Bearer <TOKEN>' \\ # (2)
-d '{ 
    "name": "workload-name", 
    "projectId": "<PROJECT-ID>", '\\ # (3)
    "clusterId": "<CLUSTER-UUID>", \\ # (4)
    "spec": {  
        "compute": { 
            "cpuCoreRequest": 0.1,
            "gpuRequestType": "portion",
            "cpuMemoryRequest": "100M",
            "gpuDevicesRequest": 1,
            "gpuPortionRequest": 0.1 
        },      
        "image": "kubeflow/pytorch-dist-mnist:latest",  
        "numWorkers": 2,  \\ 
        "distributedFramework": "PyTorch" \\
    } 
}'"""  # noqa: W291  (the trailing spaces are the page's)
ANNOTATIONS = (" # (1)", " # (2)", " '\\ # (3)", " \\ # (4)")  # each with what breaks the shell
STRAY_BACKSLASHES = (  # inside the JSON body
    ('"numWorkers": 2,  \\ \n', '"numWorkers": 2,\n'),
    ('"distributedFramework": "PyTorch" \\\n', '"distributedFramework": "PyTorch"\n'),
)
FRACTION = {"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": 0.1}


def fill(snippet: str, workload: str) -> str:
    """``runai`` -> ``ringleader``; the project and workload placeholders filled."""
    snippet = snippet.replace('"project-name"', '"team-a"')
    return snippet.replace("runai ", "ringleader ").replace("workload-name", workload)


@dataclass
class Alice(UserShell):
    """alice's shell on her own machine, and what she knows of the server."""

    url: str = ""
    key: tuple[str, str] = ("", "")  # her access key: id, secret

    def spec(self, name: str) -> dict[str, Any]:
        """The workload's stored spec (Run:ai's ``spec``) as ``describe -o json`` shows it."""
        shown = self.paste(f"ringleader describe {name} -o json")
        assert shown.returncode == 0, shown.stderr
        return json.loads(shown.stdout)["spec"]["spec"]

    def started_as_the_seed_says(self, name: str) -> None:
        """As the seed says, "one master and two workers", running the image (its stand-in);
        then deleted, to leave the quota to the next tab."""
        pods = self.wait_running(name, 3)
        assert set(pods) == {f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"}
        described = self.paste(f"ringleader describe {name}").stdout
        assert "Image: kubeflow/pytorch-dist-mnist:latest" in described, described
        assert "Command: python -m ringleader.examples.digits" in described, described
        assert self.paste(f"ringleader delete {name}").returncode == 0


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alice]:
    """The prerequisites made by an admin on the server's machine, and alice's shell."""
    root = tmp_path_factory.mktemp("seed002")
    server = ServerProcess(root / "server")
    server.start()
    try:
        assert server.cli("project", "create", "team-a", "--gpu", "1").returncode == 0
        made = server.cli("user", "create", "alice")
        assert made.returncode == 0, made.stderr
        key = re.findall(r"^Client (?:ID|secret):\s+(\S+)$", made.stdout, re.M)
        assert server.cli("user", "assign", "alice", "team-a").returncode == 0
        home = root / "alice"
        home.mkdir()
        env = {"PATH": user_path(), "RINGLEADER_URL": server.url, "RINGLEADER_HOME": str(home),
               "HOME": str(home), "TERM": "dumb", "COLUMNS": "80"}  # fmt: skip
        shell = Alice(home, env, server.url, (key[0], key[1]))
        # Logged in already, so each test also runs alone (test_step_1 logs in as printed).
        quiet = shell.paste(f"ringleader login --client-id {key[0]} --client-secret {key[1]}")
        assert quiet.returncode == 0, quiet.stderr
        yield shell
    finally:
        server.kill()
        stop_workloads(server.home)


def test_step_1_logging_in(alice: Alice) -> None:
    options = alice.paste("ringleader login --help")  # CLI V2's step 1
    assert options.returncode == 0 and "--client-id" in options.stdout, options.stderr

    with Terminal(["ringleader", "login"], alice.env, cwd=str(alice.workdir)) as login:
        login.expect(r"Client id: ")
        login.type(f"{alice.key[0]}\n")
        login.expect(r"Client secret: ")
        login.type(f"{alice.key[1]}\n")
        login.expect(rf"Logged in to {re.escape(alice.url)} as alice")
        assert login.wait() == 0, login.transcript
    assert alice.key[1] not in login.transcript  # never echoed
    config = Path(alice.env["RINGLEADER_HOME"]) / "config.json"
    assert oct(config.stat().st_mode)[-3:] == "600"
    assert "User: alice" in alice.paste("ringleader whoami").stdout


def test_user_interface_path_with_environment_and_compute_assets(alice: Alice) -> None:
    for step in (
        "ringleader project set team-a",  # "Select the project"
        "ringleader environment create pytorch-dt -i kubeflow/pytorch-dist-mnist:latest",
        # GPU devices per pod 1, a % of its memory; CPU 0.1 cores and 100 MB (the defaults)
        "ringleader compute create small-fraction -g 0.1 --cpu 0.1 --memory 100M",
        # "enter 2 workers and select 'small-fraction'", then CREATE TRAINING
        "ringleader submit-dist pytorch mnist-ui --workers 2 "
        "--environment-asset pytorch-dt --compute small-fraction",
    ):
        done = alice.paste(step)
        assert done.returncode == 0, f"{step}: {done.stderr}"
    assert alice.spec("mnist-ui")["compute"] == {
        **FRACTION, "cpuCoreRequest": 0.1, "cpuMemoryRequest": "100M"
    }  # fmt: skip
    alice.started_as_the_seed_says("mnist-ui")


def test_cli_v1_as_printed(alice: Alice) -> None:
    done = alice.paste(fill(CLI_V1, "mnist-v1"))
    assert done.returncode == 0, done.stderr
    assert "The workload 'mnist-v1' has been submitted successfully" in done.stdout
    assert "project team-a" in " ".join(done.stdout.split())
    assert alice.spec("mnist-v1")["compute"] == FRACTION  # -g 0.1: a portion of one device
    alice.started_as_the_seed_says("mnist-v1")


def test_cli_v2_as_printed_runs_its_last_line_alone(alice: Alice) -> None:
    pasted = alice.paste(fill(CLI_V2, "mnist-v2"))
    assert pasted.returncode == 127, pasted  # the last line, a command of its own
    assert "--gpu-request-type: command not found" in pasted.stderr, pasted.stderr
    assert "Creating distributed workload mnist-v2 (id " in pasted.stdout, pasted.stdout
    compute = alice.spec("mnist-v2").get("compute") or {}
    assert "gpuPortionRequest" not in compute and "cpuMemoryRequest" not in compute, compute
    alice.started_as_the_seed_says("mnist-v2")

    continued = CLI_V2.replace("--workers 2 \n", "--workers 2 \\\n")  # the backslash added
    done = alice.paste(fill(continued, "mnist-v2-fixed"))
    assert done.returncode == 0, done.stderr
    assert alice.spec("mnist-v2-fixed")["compute"] == {**FRACTION, "cpuMemoryRequest": "100M"}
    alice.started_as_the_seed_says("mnist-v2-fixed")


def test_api_curl_with_the_annotations_removed(alice: Alice) -> None:
    def curl_json(line: str) -> Any:
        done = alice.paste(line)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    # "you will need to obtain a token": Run:ai's API authentication request.
    login = json.dumps({"grantType": "client_credentials", "clientID": alice.key[0],
                        "clientSecret": alice.key[1]})  # fmt: skip
    token = curl_json(f"curl -s -X POST {alice.url}/api/v1/token "
                      f"-H 'Content-Type: application/json' -d {shlex.quote(login)}")  # fmt: skip
    bearer = f"-H 'Authorization: Bearer {token['accessToken']}'"
    listing = curl_json(f"curl -s {alice.url}/api/v1/org-unit/projects {bearer}")
    assert isinstance(listing, dict), f"not Run:ai's wrapped {{'projects': [...]}}: {listing}"
    projects = listing["projects"]
    clusters = curl_json(f"curl -s {alice.url}/api/v1/clusters {bearer}")
    assert isinstance(clusters, list), f"GET /api/v1/clusters answered {clusters}"
    filled = fill(API, "mnist-api")
    for placeholder, value in (
        ("https://<COMPANY-URL>", alice.url),
        ("<TOKEN>", token["accessToken"]),
        ("<PROJECT-ID>", next(p["id"] for p in projects if p["name"] == "team-a")),
        ("<CLUSTER-UUID>", clusters[0]["uuid"]),
    ):
        filled = filled.replace(placeholder, value)

    as_printed = alice.paste(filled)  # `\ # (1)`: an escaped space, "#" in its word, "("
    assert as_printed.returncode == 2, as_printed
    assert "syntax error near unexpected token" in as_printed.stderr, as_printed.stderr

    for annotation in ANNOTATIONS:
        filled = filled.replace(annotation, "")
    refused = curl_json(filled)  # the stray backslashes are in the body
    assert "json" in json.dumps(refused).lower(), refused
    assert "mnist-api" not in alice.paste("ringleader list").stdout  # nothing created

    for stray, plain in STRAY_BACKSLASHES:
        assert stray in filled
        filled = filled.replace(stray, plain)
    accepted = curl_json(filled)
    assert accepted["name"] == "mnist-api" and accepted["workloadId"], accepted
    assert alice.spec("mnist-api")["compute"] == {
        **FRACTION, "cpuCoreRequest": 0.1, "cpuMemoryRequest": "100M"
    }  # fmt: skip
    alice.started_as_the_seed_says("mnist-api")
