"""Run:ai's official Python client, ``runapy``, unmodified, against a real server.

What a Run:ai user scripts with: its ``ApiClient`` logs in (``app_token`` with
``AppId``/``AppSecret``) and schedules its token's renewal by the JWT's
``exp``; ``RunaiClient``'s API classes list projects and clusters, create a
distributed workload with 2 workers from its own models, poll its ``phase``,
list with a filter, get it, read its pods and events, and delete it.  Each
answer is also read back with runapy's own response models, so the shapes
are Run:ai's, not only the fields the flow touches.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import require, wait_until
from tests.server.conftest import ServerProcess

try:  # as runapy's README imports it
    from runai import models
    from runai.api_client import ApiClient
    from runai.configuration import Configuration
    from runai.exceptions import ApiException
    from runai.runai_client import RunaiClient
except ImportError:  # pragma: no cover - the dev extra pins it
    models = None


# The two Workload fields that keep ringleader's types (a count, a free-text reason).
RINGLEADER_TYPED = ("requestedPods", "phaseReason")


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Any]:
    require(models is not None, "runapy (pip install -c constraints.txt -e '.[dev]')")
    creds = json.loads((server.home / "credentials.json").read_text())
    config = Configuration(
        client_id=creds["clientId"], client_secret=creds["clientSecret"], runai_base_url=server.url
    )
    with RunaiClient(ApiClient(config)) as client:
        yield client


def _claims(token: str) -> dict[str, Any]:
    """The JWT's claims, decoded as runapy's TokenRefresher decodes them."""
    return json.loads(base64.b64decode(token.split(".")[1] + "=="))


def _as_runai_workload(item: dict[str, Any]) -> Any:
    """``item`` read with runapy's ``Workload`` model (strict types, enums)."""
    return models.Workload.from_dict({k: v for k, v in item.items() if k not in RINGLEADER_TYPED})


def test_runapy_drives_a_distributed_workload_end_to_end(
    client: Any, server: ServerProcess
) -> None:
    api_client = client.api_client
    # Logged in with its default refresh: the refresher read our JWT's exp.
    refresher = api_client.token_refresher
    assert refresher._token_expiry > time.time() + 3600
    assert _claims(api_client._token)["exp"] == refresher._token_expiry

    orgs, workloads = client.organizations, client.workloads
    projects = orgs.projects.get_projects().data
    assert [p["name"] for p in projects["projects"]] == ["default"]
    project = projects["projects"][0]

    clusters = orgs.clusters.get_clusters().data
    assert len(clusters) == 1
    cluster = models.DisplayedCluster.from_dict(clusters[0])
    assert cluster.uuid == project["clusterId"] and cluster.tenant_id == 1
    assert orgs.clusters.get_cluster_by_uuid(cluster.uuid).data["uuid"] == cluster.uuid

    request = models.DistributedCreationRequest(
        name="runapy-dist",
        project_id=project["id"],
        cluster_id=cluster.uuid,
        spec=models.DistributedSpecSpec(
            command="sleep",
            args="300",
            num_workers=2,
            distributed_framework="PyTorch",
            compute=models.SupersetSpecAllOfCompute(cpu_core_request=0.1),
            environment_variables=[models.EnvironmentVariable(name="GREETING", value="hi")],
            labels=[models.Label(name="team", value="vision")],
        ),
    )
    created = workloads.distributed.create_distributed(request)
    assert created.status_code == 202
    workload_id = created.data["workloadId"]

    def running() -> bool:
        phase = workloads.workloads.get_workload(workload_id).data["phase"]
        assert phase not in ("Failed", "Completed"), phase
        return phase == "Running"

    wait_until(running, 120, "the workload Running")

    listed = workloads.workloads.get_workloads(filter_by=["name==runapy-dist", "phase==Running"])
    page = listed.data
    assert [w["id"] for w in page["workloads"]] == [workload_id]
    runai_items = [
        {k: v for k, v in w.items() if k not in RINGLEADER_TYPED} for w in page["workloads"]
    ]
    models.GetWorkloads200Response.from_dict({**page, "workloads": runai_items})
    assert (
        workloads.workloads.get_workloads(filter_by=["name==nothing-so-named"]).data["workloads"]
        == []
    )

    got = workloads.workloads.get_workload(workload_id).data
    workload = _as_runai_workload(got)
    assert (workload.id, workload.phase.value, workload.cluster_id) == (
        workload_id,
        "Running",
        cluster.uuid,
    )
    assert workload.namespace == "runai-default" and workload.type == "distributed"
    assert workload.running_pods == 3 and got["requestedPods"] == 3

    pods = workloads.pods.get_workload_pods(workload_id).data
    models.GetRevisionPods200Response.from_dict(pods)
    assert [p["name"] for p in pods["pods"]] == [
        "runapy-dist-master-0",
        "runapy-dist-worker-0",
        "runapy-dist-worker-1",
    ]
    assert {p["k8sPhase"] for p in pods["pods"]} == {"Running"}

    events = workloads.events.get_workload_events(workload_id).data
    models.GetWorkloadEvents200Response.from_dict(events)
    warnings = [e for e in events["events"] if e["type"] == "Warning"]
    assert len(warnings) == 1 and "spec.labels" in warnings[0]["message"]
    assert "sshAuthMountPath" not in warnings[0]["message"]  # runapy's default: no noise

    distributed = workloads.distributed.get_distributed(workload_id).data
    assert distributed["workloadId"] == workload_id and distributed["actualPhase"] == "Running"

    deleted = workloads.distributed.delete_distributed(workload_id)
    assert deleted.status_code == 202

    def gone() -> bool:
        try:
            workloads.workloads.get_workload(workload_id)
        except ApiException as exc:
            assert exc.status == 404, exc
            return True
        return False

    wait_until(gone, 120, "the workload deleted")


def test_runapy_renews_its_token_when_it_is_due(server: ServerProcess) -> None:
    """A margin longer than the token's life makes every call renew first: runapy asks
    our token endpoint again and schedules the next renewal by the new JWT's exp."""
    require(models is not None, "runapy (pip install -c constraints.txt -e '.[dev]')")
    creds = json.loads((server.home / "credentials.json").read_text())
    config = Configuration(
        client_id=creds["clientId"],
        client_secret=creds["clientSecret"],
        runai_base_url=server.url,
        token_refresh_margin=48 * 3600,
    )
    with RunaiClient(ApiClient(config)) as client:
        first = client.api_client._token
        listed = client.organizations.projects.get_projects().data
        assert [p["name"] for p in listed["projects"]] == ["default"]
        second = client.api_client._token
        assert second != first  # renewed before the call, which the new token made
        assert client.api_client.default_headers["authorization"] == f"Bearer {second}"
        assert _claims(second)["exp"] == client.api_client.token_refresher._token_expiry


ENV_OF_ITS_FRAMEWORK = (
    "-c 'echo \"$RANK ${TF_CONFIG:+tf} ${JAX_PROCESS_ID:+jax$JAX_PROCESS_ID}"
    " ${DMLC_TASK_ID:+dmlc$DMLC_TASK_ID}\"'"
)


def test_runapy_submits_every_framework_and_each_runs_with_its_pods(
    client: Any, server: ServerProcess, tmp_path: Any
) -> None:
    """TF, JAX and XGBoost as runapy's models name them (issue 25): each runs to
    Completed with its framework's pods and names; an XGBoost GPU fraction is a 422
    naming the field, and nothing is created."""
    project = client.organizations.projects.get_projects().data["projects"][0]
    workloads = client.workloads
    heads = {"TF": "chief-0", "JAX": None, "XGBoost": "master-0"}
    said = {"TF": "tf", "JAX": "jax", "XGBoost": "dmlc"}
    ids = {}
    for framework in heads:
        request = models.DistributedCreationRequest(
            name=f"rp-{framework.lower()}", project_id=project["id"],
            cluster_id=project["clusterId"],
            spec=models.DistributedSpecSpec(
                command="sh", args=ENV_OF_ITS_FRAMEWORK, num_workers=2,
                distributed_framework=framework, working_dir=str(tmp_path),
                compute=models.SupersetSpecAllOfCompute(cpu_core_request=0.1),
            ),
        )  # fmt: skip
        created = workloads.distributed.create_distributed(request)
        assert created.status_code == 202
        ids[framework] = created.data["workloadId"]
    for framework, workload_id in ids.items():

        def ended(workload_id: str = workload_id) -> str | None:
            phase = workloads.workloads.get_workload(workload_id).data["phase"]
            return phase if phase in ("Completed", "Failed") else None

        assert wait_until(ended, 180, f"{framework} ended") == "Completed"
        pods = [p["name"] for p in workloads.pods.get_workload_pods(workload_id).data["pods"]]
        name, head = f"rp-{framework.lower()}", heads[framework]
        expected = [f"{name}-worker-{i}" for i in range(2)]
        assert pods == ([f"{name}-{head}"] if head else []) + expected, pods
        logs = server.cli("logs", name).stdout
        for rank in range(len(pods)):
            assert re.search(rf"\] {rank} .*{said[framework]}", logs), logs
    fraction = models.DistributedCreationRequest(
        name="rp-fraction", project_id=project["id"], cluster_id=project["clusterId"],
        spec=models.DistributedSpecSpec(
            command="true", num_workers=1, distributed_framework="XGBoost",
            compute=models.SupersetSpecAllOfCompute(gpu_devices_request=1,
                                                    gpu_request_type="portion",
                                                    gpu_portion_request=0.5),
        ),
    )  # fmt: skip
    with pytest.raises(ApiException) as refused:
        workloads.distributed.create_distributed(fraction)
    assert refused.value.status == 422
    assert "spec.compute.gpuPortionRequest" in str(refused.value.body), refused.value.body
    listed = workloads.workloads.get_workloads(filter_by=["name==rp-fraction"]).data
    assert listed["workloads"] == []
