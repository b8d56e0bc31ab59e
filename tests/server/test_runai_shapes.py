"""Run:ai's REST shapes, field by field: tokens, clusters, wrapped lists, the
workload spec's every field, the ``Workload`` answer, and 422s that never echo
a secret.  The field lists come from ``runapy``'s models (Run:ai's OpenAPI
document), so a field Run:ai adds shows up here as a failure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from ringleader.runai_fields import MAX_NAMED, ignored_message
from ringleader.server.app import create_app
from ringleader.server.config import ServerConfig
from ringleader.spec import Compute, DistributedSpec, EnvironmentVariable, PodSpec, WorkloadSpec
from tests.conftest import require
from tests.server.conftest import API

try:
    from runai import models
except ImportError:  # pragma: no cover - the dev extra pins it
    models = None


def _claims(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


def _submit(api: API, body: dict[str, Any]) -> Any:
    return api.post("/api/v1/workloads/distributed", json={"projectId": api.project_id(), **body})


def _events(api: API, workload_id: str) -> list[dict[str, Any]]:
    return api.get(f"/api/v1/workloads/{workload_id}/events").json()["events"]


# ----- tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grant", "id_field", "secret_field"),
    [
        ("client_credentials", "clientID", "clientSecret"),
        ("app_token", "AppId", "AppSecret"),  # what runapy sends
        ("app_token", "appID", "appSecret"),  # Run:ai's documented (deprecated) spelling
        ("app_token", "clientID", "clientSecret"),
    ],
)
def test_a_token_is_a_jwt_with_exp_looked_up_by_digest_and_revocable(
    api: API, grant: str, id_field: str, secret_field: str
) -> None:
    body = {
        "grantType": grant,
        id_field: api.creds["clientId"],
        secret_field: api.creds["clientSecret"],
    }
    answer = api.client.post("/api/v1/token", json=body)
    assert answer.status_code == 200, answer.text
    token = answer.json()["accessToken"]
    header, claims = (json.loads(base64.urlsafe_b64decode(p + "==")) for p in token.split(".")[:2])
    assert header == {"alg": "HS256", "typ": "JWT"}
    assert claims["exp"] - claims["iat"] == answer.json()["expiresIn"]
    assert claims["sub"] == api.get("/api/v1/me").json()["id"]
    # runapy decodes the claims with base64.b64decode (not the URL-safe alphabet).
    assert json.loads(base64.b64decode(token.split(".")[1] + "==")) == claims

    from ringleader.server.models import Token

    with api.client.app.state.readers() as s:
        digests = set(s.query(Token.token_hash))
    assert (hashlib.sha256(token.encode()).hexdigest(),) in digests  # stored as a digest only
    assert all(token not in row for row in digests)

    auth = {"Authorization": f"Bearer {token}"}
    assert api.client.get("/api/v1/me", headers=auth).status_code == 200
    assert api.client.delete("/api/v1/token", headers=auth).status_code == 204
    assert api.client.get("/api/v1/me", headers=auth).status_code == 401


def test_claims_are_not_trusted(api: API) -> None:
    """A token whose claims are edited (another user, a later exp) is unknown."""
    header, _, secret = api.token.split(".")
    forged = base64.urlsafe_b64encode(
        json.dumps({**_claims(api.token), "exp": 4102444800}).encode()
    ).rstrip(b"=")
    bad = api.client.get(
        "/api/v1/me", headers={"Authorization": f"Bearer {header}.{forged.decode()}.{secret}"}
    )
    assert bad.status_code == 401


def test_other_grant_types_are_a_clear_422(api: API) -> None:
    body = {"grantType": "refresh_token", "refreshToken": "r-hunter2"}
    answer = api.client.post("/api/v1/token", json=body)
    assert answer.status_code == 422
    assert "app_token" in answer.text and "hunter2" not in answer.text


# ----- 422s never echo secrets -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # The issue's case: clientId misspelt; the body with the secret is the input.
        (
            "/api/v1/token",
            {"grantType": "client_credentials", "clientId": "rl-x", "clientSecret": "hunter2"},
        ),
        ("/api/v1/token", {"grantType": "app_token", "AppId": "rl-x", "AppSecret": ["hunter2"]}),
        ("/api/v1/token", {"grantType": "password", "username": "u", "password": "hunter2"}),
        ("/api/v1/token", {"grantType": "external_token_exchange", "externalToken": "hunter2"}),
        ("/api/v1/org-unit/projects", {"name": "Not A Name", "adminPassword": "hunter2"}),
        ("/api/v1/users", {"username": "-x", "meta": {"apiToken": "hunter2"}}),
        (
            "/api/v1/workloads/distributed",
            {"name": "w", "projectId": "default", "spec": {"numWorkers": 1, "gitToken": "hunter2"}},
        ),
        (
            "/api/v1/workloads/distributed",
            {"name": "w", "spec": {"numWorkers": 1, "storage": {"s3": [{"secretKey": "hunter2"}]}}},
        ),
    ],
)
def test_no_422_echoes_a_field_named_secret_password_or_token(
    api: API, path: str, body: dict[str, Any]
) -> None:
    answer = api.post(path, json=body)
    assert answer.status_code == 422, answer.text
    assert "hunter2" not in answer.text
    assert answer.json()["detail"], answer.text  # still says what is wrong


# ----- clusters --------------------------------------------------------------------------------


def test_the_server_is_one_cluster_with_a_uuid_that_survives_a_restart(tmp_path: Path) -> None:
    require(models is not None, "runapy")
    config = ServerConfig(data_dir=tmp_path / "home", background=False, run_as="server")
    seen = []
    for _ in range(2):
        with TestClient(create_app(config)) as client:
            api = API(client, tmp_path / "home")
            (cluster,) = api.get("/api/v1/clusters").json()
            models.DisplayedCluster.from_dict(cluster)
            assert cluster["tenantId"] == 1 and cluster["status"]["state"] == "Connected"
            assert cluster["domain"] == config.url and cluster["version"]
            one = api.get(f"/api/v1/clusters/{cluster['uuid']}").json()
            assert {**one, "lastLiveness": None} == {**cluster, "lastLiveness": None}
            assert api.get("/api/v1/clusters/not-this-one").status_code == 404
            assert api.client.get("/api/v1/clusters").status_code == 401
            seen.append((cluster["uuid"], cluster["createdAt"]))
    assert seen[0] == seen[1]
    assert oct((tmp_path / "home" / "cluster.json").stat().st_mode & 0o777) == "0o600"


def test_clusterid_names_this_cluster_or_is_a_422(api: API) -> None:
    uuid = api.get("/api/v1/clusters").json()[0]["uuid"]
    spec = {"command": "true", "numWorkers": 1}
    assert _submit(api, {"name": "here", "clusterId": uuid, "spec": spec}).status_code == 202
    elsewhere = _submit(api, {"name": "there", "clusterId": "71f69d83-ba66", "spec": spec})
    assert elsewhere.status_code == 422
    detail = elsewhere.json()["detail"][0]
    assert detail["loc"] == ["clusterId"] and uuid in detail["msg"]
    assert api.get("/api/v1/workloads", params={"filterBy": "name==there"}).json()["total"] == 0


# ----- the spec: every Run:ai field --------------------------------------------------------------


def _aliases(model: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    found = (
        [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []
    )
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _missing(theirs: type[BaseModel], ours: type[BaseModel], path: str) -> list[str]:
    """Run:ai's fields (at any depth) that our model does not accept."""
    missing = [f"{path}.{alias}" for alias in sorted(_aliases(theirs) - _aliases(ours))]
    our_fields = {f.alias or n: f for n, f in ours.model_fields.items()}
    for name, field in theirs.model_fields.items():
        alias = field.alias or name
        inner, mine = _models_in(field.annotation), our_fields.get(alias)
        if inner and mine is not None and _models_in(mine.annotation):
            missing += _missing(inner[0], _models_in(mine.annotation)[0], f"{path}.{alias}")
    return missing


def test_every_field_of_runais_distributed_and_master_spec_is_accepted() -> None:
    require(models is not None, "runapy")
    pairs = [
        (models.DistributedCreationRequest, WorkloadSpec, "body"),
        (models.DistributedSpecSpec, DistributedSpec, "spec"),
        (models.MasterSpec, PodSpec, "masterSpec"),
        (models.SupersetSpecAllOfCompute, Compute, "compute"),
        (models.EnvironmentVariable, EnvironmentVariable, "environmentVariables"),
    ]
    assert [m for theirs, ours, path in pairs for m in _missing(theirs, ours, path)] == []


POD_FIELDS: dict[str, Any] = {  # every MasterSpec field, as Run:ai's own example sets them
    "annotations": [{"name": "billing", "value": "my-billing-unit", "exclude": False}],
    "args": "-c 'exit 0'",
    "autoDeletionTimeAfterCompletionSeconds": 15,
    "backoffLimit": 3,
    "category": "Research",
    "command": "sh",
    "compute": {
        "cpuCoreLimit": 2,
        "cpuCoreRequest": 0.1,
        "cpuMemoryLimit": "300M",
        "cpuMemoryRequest": "20M",
        "extendedResources": [
            {"resource": "vendor.example/foo", "quantity": "2", "exclude": False}
        ],
        "largeShmRequest": True,
    },
    "createHomeDir": True,
    "environmentVariables": [
        {"name": "HOME_DIR", "value": "/home/me", "description": "Home directory of the user."},
        {"name": "PG_PASSWORD", "secret": {"name": "pg", "key": "POSTGRES_PASSWORD"}},
        {"name": "SCHEMA", "configMap": {"name": "my-config-map", "key": "MY_SCHEMA"}},
        {"name": "POD", "podFieldRef": {"path": "metadata.name"}},
        {"name": "PG_USER", "userCredential": {"name": "pg-user", "key": "POSTGRES_USER"}},
    ],
    "exposedUrls": [
        {
            "container": 8080,
            "url": "https://my-url.com",
            "authorizationType": "authorizedUsers",
            "authorizedUsers": ["user-a"],
            "authorizedGroups": ["group-a"],
            "toolType": "jupyter",
            "toolName": "my-pytorch",
            "name": "url-instance-a",
            "exclude": False,
        }
    ],
    "image": "kubeflow/pytorch-dist-mnist:latest",
    "imagePullPolicy": "Always",
    "imagePullSecrets": [
        {"name": "w1c2v7s6djuy1zmetozkhdomha", "userCredential": False, "exclude": False}
    ],
    "labels": [{"name": "stage", "value": "initial-research", "exclude": False}],
    "nodeAffinityRequired": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
        ]
    },
    "nodePools": ["default"],
    "nodeType": "my-node-type",
    "podAffinity": {"type": "Required", "key": "topology.kubernetes.io/zone"},
    "ports": [
        {
            "container": 8080,
            "serviceType": "LoadBalancer",
            "external": 30080,
            "toolType": "pytorch",
            "toolName": "my-pytorch",
            "name": "port-instance-a",
            "exclude": False,
        }
    ],
    "preemptibility": "preemptible",
    "priorityClass": "train",
    "probes": {
        "readiness": {
            "initialDelaySeconds": 0,
            "periodSeconds": 1,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 1,
            "handler": {
                "httpGet": {"path": "/", "port": 1, "host": "example.com", "scheme": "HTTP"}
            },
        }
    },
    "relatedUrls": [
        {"url": "https://my-url.com", "type": "wandb", "name": "url-instance-a", "exclude": False}
    ],
    "restartPolicy": "Always",
    "security": {
        "allowPrivilegeEscalation": False,
        "capabilities": ["CHOWN", "KILL"],
        "hostIpc": False,
        "hostNetwork": False,
        "readOnlyRootFilesystem": False,
        "runAsGid": 30,
        "runAsNonRoot": True,
        "runAsUid": 500,
        "seccompProfileType": "RuntimeDefault",
        "supplementalGroups": "2,3,5,8",
        "uidGidSource": "fromTheImage",
    },
    "stdin": True,
    "storage": {
        "pvc": [{"name": "data", "path": "/data", "existingPvc": True, "claimName": "my-claim"}],
        "nfs": [{"path": "/share", "server": "nfs.example", "mountPath": "/mnt/share"}],
        "emptyDirVolume": [{"name": "scratch", "path": "/scratch", "medium": "Memory"}],
    },
    "terminateAfterPreemption": False,
    "terminationGracePeriodSeconds": 20,
    "tolerations": [
        {
            "name": "gpu",
            "operator": "Equal",
            "key": "nvidia.com/gpu",
            "value": "x",
            "effect": "NoSchedule",
            "seconds": 3,
            "exclude": False,
        }
    ],
    "tty": True,
    "workingDir": "/tmp",
}

FULL_BODY: dict[str, Any] = {
    "name": "every-field",
    "useGivenNameAsPrefix": False,
    "templateId": "550e8400-e29b-41d4-a716-446655440000",
    "masterSpecSameAsWorker": False,
    "masterSpec": POD_FIELDS,
    "spec": {
        **POD_FIELDS,
        "numWorkers": 1,
        "distributedFramework": "PyTorch",
        "minReplicas": 1,
        "maxReplicas": 2,
        "slotsPerWorker": 1,
        "cleanPodPolicy": "Running",
        "mpiLauncherCreationPolicy": "AtStartup",
        "sshAuthMountPath": "/home/me/.ssh",
    },
}


def test_a_body_with_every_runai_field_is_accepted_and_what_is_ignored_is_named(api: API) -> None:
    require(models is not None, "runapy")
    uuid = api.get("/api/v1/clusters").json()[0]["uuid"]
    body = {**FULL_BODY, "projectId": api.project_id(), "clusterId": uuid}
    models.DistributedCreationRequest.from_dict(body)  # Run:ai's own model takes it
    answer = _submit(api, body)
    assert answer.status_code == 202, answer.text
    workload_id = answer.json()["workloadId"]
    (warning,) = [e for e in _events(api, workload_id) if e["type"] == "Warning"]
    assert warning["reason"] == "IgnoredFields"
    named = warning["message"]
    for path in (
        "templateId",
        "spec.labels",
        "spec.storage",
        "spec.sshAuthMountPath",
        "spec.environmentVariables[1].secret",
        "spec.compute.largeShmRequest",
        "masterSpec.nodePools",
    ):
        assert path in named, path
    listed = set(named.split(": ", 1)[1].split("; ")[0].split(", "))
    acted_on = {
        "category",
        "command",
        "args",
        "workingDir",
        "image",
        "imagePullPolicy",
        "environmentVariables",
        "compute",
        "storage",  # its hostPath volumes are mounted (image pods); the rest, below
    }
    as_here = {"terminateAfterPreemption"}  # false: what happens here anyway
    master = {f"masterSpec.{k}" for k in POD_FIELDS if k not in acted_on | as_here}
    master |= {
        "masterSpec.environmentVariables[1].secret",
        "masterSpec.environmentVariables[2].configMap",
        "masterSpec.environmentVariables[3].podFieldRef",
        "masterSpec.environmentVariables[4].userCredential",
        "masterSpec.compute.extendedResources",
        "masterSpec.compute.largeShmRequest",
        "masterSpec.storage.pvc",
        "masterSpec.storage.nfs",
        "masterSpec.storage.emptyDirVolume",
    }
    assert {p for p in listed if p.startswith("masterSpec.")} == master
    for kept in ("spec.category", "spec.command", "spec.workingDir", "description"):
        assert kept not in named, kept
    stored = api.get(f"/api/v1/workloads/{workload_id}").json()
    assert stored["category"] == "Research"
    assert stored["spec"]["spec"]["labels"] == POD_FIELDS["labels"]  # kept, shown back


def test_a_long_list_of_ignored_fields_is_cut_and_counted() -> None:
    message = ignored_message([f"spec.labels[{i}]" for i in range(MAX_NAMED + 5)])
    assert f"spec.labels[{MAX_NAMED - 1}] and 5 more" in message


def test_what_runapy_always_sends_warns_nobody(api: API) -> None:
    body = {
        "name": "plain",
        "spec": {
            "command": "true",
            "numWorkers": 1,
            "slotsPerWorker": 1,
            "sshAuthMountPath": "/root/.ssh",
        },
    }
    answer = _submit(api, body)
    assert answer.status_code == 202, answer.text
    assert not [e for e in _events(api, answer.json()["workloadId"]) if e["type"] == "Warning"]


@pytest.mark.parametrize(
    ("where", "change", "loc"),
    [
        ("spec", {"bogus": 1}, ["spec", "bogus"]),
        ("spec", {"compute": {"gpuBogus": 1}}, ["spec", "compute", "gpuBogus"]),
        ("spec", {"storage": {"pvcs": []}}, ["spec", "storage", "pvcs"]),
        ("spec", {"labels": [{"name": "a", "colour": "b"}]}, ["spec", "labels", 0, "colour"]),
        (
            "spec",
            {"environmentVariables": [{"name": "A", "fromFile": "x"}]},
            ["spec", "environmentVariables", 0, "fromFile"],
        ),
        ("spec", {"imagePullPolicy": "Sometimes"}, ["spec", "imagePullPolicy"]),
        ("spec", {"labels": [{"name": "x"}] * 257}, ["spec", "labels"]),
        ("spec", {"labels": [{"name": "a\x00b"}]}, ["spec", "labels", 0, "name"]),
        (
            "spec",
            {"storage": {"pvc": [{"a": [[[[[[[[["deep"]]]]]]]]]}]}},
            ["spec", "storage", "pvc", 0],
        ),
        ("spec", {"storage": {"pvc": [{"size": float("nan")}]}}, ["spec", "storage", "pvc", 0]),
        ("spec", {"storage": {"pvc": [{"k": "x" * 5000}]}}, ["spec", "storage", "pvc", 0]),
        ("spec", {"ports": [{"container": 70000}]}, ["spec", "ports", 0, "container"]),
        ("masterSpec", {"numWorkers": 2}, ["masterSpec", "numWorkers"]),  # not a master's field
        ("masterSpec", {"sshAuthMountPath": "/x"}, ["masterSpec", "sshAuthMountPath"]),
    ],
)
def test_fields_outside_runais_schema_and_out_of_bounds_are_a_422(
    api: API, where: str, change: dict[str, Any], loc: list[Any]
) -> None:
    body: dict[str, Any] = {"name": "bad", "spec": {"command": "true", "numWorkers": 1}}
    body[where] = {**body.get(where, {}), **change}
    answer = api.post(
        "/api/v1/workloads/distributed",
        content=json.dumps({"projectId": api.project_id(), **body}),  # NaN as JSON's NaN
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"][1:] == loc  # after "body"
    assert api.get("/api/v1/workloads/count").json()["count"] == 0  # nothing half-created


# ----- what comes back -------------------------------------------------------------------------


@pytest.mark.parametrize("sim_api", ["sqlite"], indirect=True)  # runs pods: SQLite is enough
def test_workload_answers_carry_runais_fields_and_round_their_gpus(sim_api: API) -> None:
    require(models is not None, "runapy")
    uuid = sim_api.get("/api/v1/clusters").json()[0]["uuid"]
    body = {
        "name": "tenths",
        "projectId": sim_api.project_id(),
        "spec": {"command": "sleep 300", "numWorkers": 2, "compute": {"gpuPortionRequest": 0.1}},
    }
    answer = sim_api.post("/api/v1/workloads/distributed", json=body)
    workload_id = answer.json()["workloadId"]
    sim_api.wait_phase(workload_id, {"Running"})
    raw = sim_api.get(f"/api/v1/workloads/{workload_id}")
    assert "0.30000000000000004" not in raw.text
    w = raw.json()
    assert (w["requestedGpus"], w["allocatedGpus"]) == (0.3, 0.3)
    assert (w["id"], w["workloadId"], w["phase"], w["actualPhase"]) == (
        workload_id,
        workload_id,
        "Running",
        "Running",
    )
    assert w["clusterId"] == uuid and w["namespace"] == "runai-default"
    assert (w["priorityClassName"], w["priority"], w["category"]) == ("train", 50, "Train")
    assert w["conditions"][0]["type"] == "Running" and w["phaseUpdatedAt"] >= w["createdAt"]
    models.Workload.from_dict(
        {k: v for k, v in w.items() if k not in ("requestedPods", "phaseReason")}
    )

    page = sim_api.get("/api/v1/workloads", params={"filterBy": "phase==Running", "limit": 1})
    assert page.json()["workloads"][0]["id"] == workload_id and page.json()["next"] is None
    assert sim_api.get("/api/v1/workloads", params={"search": "tenth"}).json()["total"] == 1

    pods = sim_api.get(f"/api/v1/workloads/{workload_id}/pods").json()["pods"]
    assert [(p["workloadId"], p["clusterId"], p["nodeName"]) for p in pods] == [
        (workload_id, uuid, "sim-0")
    ] * 3
    events = sim_api.get(f"/api/v1/workloads/{workload_id}/events").json()
    assert events["next"] is None and events["events"][0]["type"] == "Submitted"
    first = sim_api.get(
        f"/api/v1/workloads/{workload_id}/events", params={"sortOrder": "desc", "limit": 1}
    ).json()
    assert first["events"][0]["id"] == events["events"][-1]["id"] and first["next"] == 1
    assert events["events"][0]["involvedObject"] == {
        "uid": workload_id,
        "kind": "Workload",
        "name": "tenths",
        "namespace": "runai-default",
    }


def test_projects_come_wrapped_with_their_cluster(api: API) -> None:
    for name in ("team-a", "team-b"):
        assert api.post("/api/v1/org-unit/projects", json={"name": name}).status_code == 201
    listed = api.get("/api/v1/org-unit/projects").json()
    uuid = api.get("/api/v1/clusters").json()[0]["uuid"]
    assert [p["name"] for p in listed["projects"]] == ["default", "team-a", "team-b"]
    assert listed["next"] is None and {p["clusterId"] for p in listed["projects"]} == {uuid}
    page = api.get("/api/v1/org-unit/projects", params={"offset": 1, "limit": 1}).json()
    assert [p["name"] for p in page["projects"]] == ["team-a"] and page["next"] == 2


@pytest.mark.parametrize("text", ["\\ud800", "a\\u0000b"])
@pytest.mark.parametrize(
    ("field", "loc"),
    [
        ('"labels": [{"name": "a", "value": "TEXT"}]', ["spec", "labels", 0, "value"]),
        ('"sshAuthMountPath": "TEXT"', ["spec", "sshAuthMountPath"]),
        ('"storage": {"pvc": [{"claimName": "TEXT"}]}', ["spec", "storage", "pvc", 0]),
        ('"storage": {"pvc": [{"TEXT": 1}]}', ["spec", "storage", "pvc", 0]),
        (
            '"environmentVariables": [{"name": "A", "description": "TEXT"}]',
            ["spec", "environmentVariables", 0, "description"],
        ),
    ],
)
def test_runai_fields_are_storable_text_or_a_422(
    api: API, text: str, field: str, loc: list[Any]
) -> None:
    spec = '{"numWorkers": 1, "command": "true", ' + field.replace("TEXT", text) + "}"
    raw = f'{{"name": "w", "projectId": "{api.project_id()}", "spec": {spec}}}'
    answer = api.post(
        "/api/v1/workloads/distributed", content=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"][1:] == loc
    assert api.get("/api/v1/workloads/count").json()["count"] == 0


def test_a_stored_spec_past_the_runai_bounds_is_still_shown(api: API) -> None:
    """The bounds guard input; a row that breaks them (stored before they existed) is shown."""
    from ringleader.server.models import Workload

    deep: Any = "deep"
    for _ in range(20):
        deep = [deep]
    spec = {
        "name": "old",
        "projectId": api.project_id(),
        "spec": {
            "command": "true",
            "numWorkers": 1,
            "labels": [{"name": f"l{i}", "value": "v"} for i in range(1000)],
            "storage": {"pvc": [{"nested": deep}]},
        },
    }
    with api.client.app.state.sessions() as s, s.begin():
        s.add(Workload(name="old", project_id=spec["projectId"], spec=spec, spec_version=1,
                       framework="PyTorch", desired_phase="Running", phase="Pending"))  # fmt: skip
    (listed,) = api.get("/api/v1/workloads").json()["workloads"]
    shown = api.get(f"/api/v1/workloads/{listed['id']}")
    assert shown.status_code == 200 and len(shown.json()["spec"]["spec"]["labels"]) == 1000
