"""/api/v1/asset/environment and /api/v1/asset/compute: Run:ai's workload assets as
seed 002's UI path makes them (the ``pytorch-dt`` environment and the
``small-fraction`` compute resource), on SQLite and PostgreSQL: shapes and
statuses, names unique per scope, roles, bad input naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import API

ENV = "/api/v1/asset/environment"
COMPUTE = "/api/v1/asset/compute"


def environment(name: str, project: str | None = "default", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "scope": "project" if project else "tenant"}
    if project:
        meta["projectId"] = project
    return {"meta": meta, "spec": {"image": "kubeflow/pytorch-dist-mnist:latest", **spec}}


SMALL_FRACTION = {
    "gpuDevicesRequest": 1,
    "gpuRequestType": "portion",
    "gpuPortionRequest": 0.1,
    "cpuCoreRequest": 0.1,
    "cpuMemoryRequest": "100M",
}


def compute(name: str, project: str | None = "default", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "scope": "project" if project else "tenant"}
    if project:
        meta["projectId"] = project
    return {"meta": meta, "spec": {**SMALL_FRACTION, **spec}}


def names(api: API, path: str, headers: dict[str, str] | None = None, **params: str) -> list[str]:
    response = api.get(path, params=params, headers=headers or {})
    assert response.status_code == 200, response.text
    return [entry["meta"]["name"] for entry in response.json()["entries"]]


def test_seed_002_assets_are_created_listed_read_updated_and_deleted(api: API) -> None:
    project_id = api.project_id("default")
    made = api.post(
        ENV,
        json=environment(
            "pytorch-dt",
            project_id,
            command="python",
            args="/opt/mnist/src/mnist.py",
            workingDir="/opt",
            environmentVariables=[{"name": "EPOCHS", "value": "1"}],
            imagePullPolicy="IfNotPresent",  # applied to image pods (README: Images)
            runAsUid=1000,
            tty=True,
            probes={"readiness": {"initialDelaySeconds": 5}},
        ),
    )
    assert made.status_code == 202, made.text
    env = made.json()
    meta, spec = env["meta"], env["spec"]
    assert meta["kind"] == "environment" and meta["scope"] == "project"
    assert meta["projectId"] == project_id and meta["projectName"] == "default"
    assert meta["createdBy"] == "admin" and meta["updateCount"] == 0 and len(meta["id"]) == 36
    assert spec["image"] == "kubeflow/pytorch-dist-mnist:latest"
    assert spec["environmentVariables"][0] == {**spec["environmentVariables"][0], "name": "EPOCHS"}
    assert spec["imagePullPolicy"] == "IfNotPresent" and spec["runAsUid"] == 1000

    small = api.post(COMPUTE, json=compute("small-fraction", "default"))  # a project's name
    assert small.status_code == 202, small.text
    assert small.json()["spec"] | SMALL_FRACTION == small.json()["spec"]
    assert small.json()["meta"]["projectId"] == project_id

    listed = api.get(ENV)
    assert listed.status_code == 200 and list(listed.json()) == ["entries"]
    assert [e["meta"]["id"] for e in listed.json()["entries"]] == [meta["id"]]
    assert names(api, COMPUTE, projectId=project_id) == ["small-fraction"]
    assert names(api, COMPUTE, name="small-fraction") == ["small-fraction"]
    assert names(api, COMPUTE, name="nope") == []
    assert api.get(f"{ENV}/{meta['id']}").json() == env
    assert api.get(f"{COMPUTE}/{meta['id']}").status_code == 404  # another kind's id

    change = {"meta": {"name": "pytorch-dt2", "description": "seed 002"}, "spec": {"image": "x:1"}}
    updated = api.put(f"{ENV}/{meta['id']}", json=change)
    assert updated.status_code == 202, updated.text
    assert updated.json()["meta"]["updateCount"] == 1
    assert updated.json()["meta"]["description"] == "seed 002"
    assert updated.json()["spec"]["image"] == "x:1" and updated.json()["spec"]["command"] is None
    assert updated.json()["meta"]["scope"] == "project"  # a PUT never moves an asset

    deleted = api.delete(f"{ENV}/{meta['id']}")
    assert deleted.status_code == 202 and deleted.json()["code"] == 202, deleted.text
    assert "pytorch-dt2" in deleted.json()["message"]
    assert api.get(f"{ENV}/{meta['id']}").status_code == 404
    assert api.delete(f"{ENV}/{meta['id']}").status_code == 404


def test_names_are_unique_per_kind_in_their_scope(api: API) -> None:
    assert api.post(ENV, json=environment("base")).status_code == 202
    again = api.post(ENV, json=environment("base", command="true"))
    assert again.status_code == 409 and "'base'" in again.json()["message"], again.text
    assert "project 'default'" in again.json()["message"]
    # Another kind, another project, or everyone's: each is its own scope.
    assert api.post(COMPUTE, json=compute("base")).status_code == 202
    assert api.post("/api/v1/org-unit/projects", json={"name": "team-a"}).status_code == 201
    assert api.post(ENV, json=environment("base", "team-a")).status_code == 202
    assert api.post(ENV, json=environment("base", None)).status_code == 202
    twice = api.post(ENV, json=environment("base", None))
    assert twice.status_code == 409 and "every project" in twice.json()["message"]
    # Renaming onto a taken name is refused too; onto its own name it is not.
    other = api.post(ENV, json=environment("other")).json()["meta"]["id"]
    rename = {"meta": {"name": "base"}, "spec": {}}
    assert api.put(f"{ENV}/{other}", json=rename).status_code == 409
    keep = {"meta": {"name": "other"}, "spec": {}}
    assert api.put(f"{ENV}/{other}", json=keep).status_code == 202

    # A project's list holds its own assets and everyone's; scope=project only its own.
    assert names(api, ENV, projectId="team-a") == ["base", "base"]
    assert names(api, ENV, projectId="team-a", scope="project") == ["base"]
    assert names(api, ENV, scope="tenant") == ["base"]
    assert names(api, ENV, scope="department") == []
    # Deleting a project deletes its assets with it.
    assert api.delete("/api/v1/org-unit/projects/team-a").status_code == 204
    assert names(api, ENV) == ["base", "base", "other"]


def test_roles_viewers_read_researchers_write_their_project_admins_everything(api: API) -> None:
    viewer, researcher, stranger = (api.new_user(n) for n in ("vera", "rita", "sam"))
    for user, role in (("vera", "viewer"), ("rita", "researcher")):
        put = api.put(f"/api/v1/org-unit/projects/default/members/{user}", json={"role": role})
        assert put.status_code == 200, put.text
    shared = api.post(COMPUTE, json=compute("shared", None)).json()["meta"]["id"]

    # A researcher creates, changes and deletes its project's assets ...
    mine = api.post(ENV, json=environment("mine"), headers=researcher)
    assert mine.status_code == 202, mine.text
    assert mine.json()["meta"]["createdBy"] == "rita"
    mine_id = mine.json()["meta"]["id"]
    change = {"meta": {"name": "mine"}, "spec": {"image": "y:2"}}
    assert api.put(f"{ENV}/{mine_id}", json=change, headers=researcher).status_code == 202
    # ... but not everyone's.
    tenant = api.post(ENV, json=environment("everyone", None), headers=researcher)
    assert tenant.status_code == 403 and "admin" in tenant.json()["message"], tenant.text
    refused = api.delete(f"{COMPUTE}/{shared}", headers=researcher)
    assert refused.status_code == 403

    # A viewer reads the project's assets and everyone's, and changes none.
    assert names(api, ENV, headers=viewer) == ["mine"]
    assert names(api, COMPUTE, headers=viewer) == ["shared"]
    assert api.get(f"{ENV}/{mine_id}", headers=viewer).status_code == 200
    made = api.post(ENV, json=environment("vera-env"), headers=viewer)
    assert made.status_code == 403, made.text
    assert "viewer" in made.json()["message"] and "researcher" in made.json()["message"]
    assert api.delete(f"{ENV}/{mine_id}", headers=viewer).status_code == 403

    # A stranger sees everyone's assets only; the project's do not exist for it.
    assert names(api, ENV, headers=stranger) == []
    assert names(api, COMPUTE, headers=stranger) == ["shared"]
    assert api.get(f"{ENV}/{mine_id}", headers=stranger).status_code == 404
    assert api.delete(f"{ENV}/{mine_id}", headers=stranger).status_code == 404
    assert api.post(ENV, json=environment("x"), headers=stranger).status_code == 404
    assert api.get(ENV, params={"projectId": "default"}, headers=stranger).status_code == 404

    assert api.delete(f"{ENV}/{mine_id}", headers=researcher).status_code == 202
    assert api.get(ENV, headers={"Authorization": "Bearer nope"}).status_code == 401


BAD_ENVIRONMENTS = [
    ({"meta": {"name": "Not A Name", "scope": "tenant"}, "spec": {}}, ["meta", "name"]),
    ({"meta": {"name": "x", "scope": "department"}, "spec": {}}, ["meta", "scope"]),
    ({"meta": {"name": "x", "scope": "galaxy"}, "spec": {}}, ["meta", "scope"]),
    ({"meta": {"name": "x", "scope": "project"}, "spec": {}}, ["meta", "projectId"]),
    (
        {"meta": {"name": "x", "scope": "tenant", "projectId": "default"}, "spec": {}},
        ["meta", "projectId"],
    ),
    ({"meta": {"name": "x", "scope": "tenant", "description": "d" * 251}, "spec": {}}, None),
    ({"meta": {"name": "x", "scope": "tenant", "colour": "red"}, "spec": {}}, ["meta", "colour"]),
    (environment("x", None, shell="bash"), ["spec", "shell"]),
    (environment("x", None, command="echo 'open"), ["spec", "command"]),
    (environment("x", None, workingDir="/a\x00b"), ["spec", "workingDir"]),
    (environment("x", None, imagePullPolicy="Sometimes"), ["spec", "imagePullPolicy"]),
    (
        environment("x", None, environmentVariables=[{"name": "RANK", "value": "3"}]),
        ["spec", "environmentVariables", "0", "name"],
    ),
    (
        environment("x", None, environmentVariables=[{"name": "A", "value": "1"}] * 2),
        ["spec", "environmentVariables"],
    ),
    (  # the workload spec's bounds (spec_limits.check_env_size): how many, and their size together
        environment("x", None, environmentVariables=[{"name": f"V{i}"} for i in range(257)]),
        ["spec", "environmentVariables"],
    ),
    (
        environment(
            "x",
            None,
            environmentVariables=[{"name": f"V{i}", "value": "v" * 32_000} for i in range(9)],
        ),
        ["spec", "environmentVariables"],
    ),
    (
        environment(
            "x", None, environmentVariables=[{"name": "TOKEN", "credential": {"assetId": "a"}}]
        ),
        ["spec", "environmentVariables", "0", "credential"],
    ),
    (environment("x", None, probes={"p": "x" * 20_000}), ["spec", "probes"]),
    ({"meta": {"name": "x", "scope": "tenant"}}, ["spec"]),
]


@pytest.mark.parametrize("api", ["sqlite"], indirect=True)
def test_bad_environments_are_422_naming_the_field_and_store_nothing(api: API) -> None:
    for body, loc in BAD_ENVIRONMENTS:
        response = api.post(ENV, json=body)
        assert response.status_code == 422, (body, response.text)
        found = [[str(p) for p in e["loc"][1:]] for e in response.json()["detail"]]
        if loc is not None:
            assert loc in found, (body, found)
    assert names(api, ENV) == []


BAD_COMPUTES = [
    ({"gpuPortionRequest": 1.5}, ["spec", "gpuPortionRequest"]),
    ({"cpuMemoryRequest": "lots"}, ["spec", "cpuMemoryRequest"]),
    ({"cpuCoreRequest": -1}, ["spec", "cpuCoreRequest"]),
    ({"gpuDevicesRequest": 10**6}, ["spec", "gpuDevicesRequest"]),
    ({"gpuRequestType": "memory"}, ["spec"]),  # memory without gpuMemoryRequest
    ({"gpuDevicesRequest": 2, "gpuRequestType": "memory", "gpuMemoryRequest": "4G"}, ["spec"]),
    ({"tpus": 1}, ["spec", "tpus"]),
]


@pytest.mark.parametrize("api", ["sqlite"], indirect=True)
def test_bad_compute_resources_are_422_naming_the_field(api: API) -> None:
    for spec, loc in BAD_COMPUTES:
        response = api.post(COMPUTE, json=compute("c", None, **spec))
        assert response.status_code == 422, (spec, response.text)
        found = [[str(p) for p in e["loc"][1:]] for e in response.json()["detail"]]
        assert any(f[: len(loc)] == loc for f in found), (spec, found)
    # Run:ai's fields without a meaning here are accepted and shown, never a 422.
    fine = api.post(
        COMPUTE,
        json=compute(
            "c",
            None,
            largeShmRequest=True,
            extendedResources=[{"resource": "vendor.example/foo", "quantity": "2"}],
        ),
    )
    assert fine.status_code == 202, fine.text
    assert fine.json()["spec"]["largeShmRequest"] is True
    # Run:ai's spec may be null: a compute resource asking for nothing.
    empty = api.post(COMPUTE, json={"meta": {"name": "none", "scope": "tenant"}, "spec": None})
    assert empty.status_code == 202, empty.text
    assert api.get(f"{COMPUTE}/a%00b").status_code == 404
    assert names(api, COMPUTE, name="a\x00b") == []


def test_an_environment_fills_only_what_the_user_left_unset() -> None:
    from ringleader.server.asset_schemas import (
        EnvironmentAssetSpec,
    )
    from ringleader.server.compute_asset_schemas import (
        ComputeAssetSpec,
    )

    env = EnvironmentAssetSpec.model_validate(
        {
            "image": "img:1",
            "command": "python train.py",
            "args": "--epochs 3",
            "workingDir": "/data",
            "environmentVariables": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "2"},
                {"name": "POLICY", "value": "x", "exclude": True},
            ],
        }
    )
    # Args alone keep the environment's command (and replace its args).
    pod = env.fill(
        {"args": "--epochs 9", "environment_variables": [{"name": "B", "value": "9"}]},
        working_dir_given=False,
    )
    assert pod["command"] == "python train.py" and pod["args"] == "--epochs 9"
    assert pod["image"] == "img:1" and pod["working_dir"] == "/data"
    assert pod["environment_variables"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "9"},
    ]
    # A working directory given (even the default one) is kept.
    assert env.fill({"working_dir": "/here"}, working_dir_given=True)["working_dir"] == "/here"

    small = ComputeAssetSpec.model_validate(
        {"gpuDevicesRequest": 1, "gpuRequestType": "memory", "gpuMemoryRequest": "4G",
         "cpuCoreRequest": 1, "cpuCoreLimit": 2, "largeShmRequest": True}
    )  # fmt: skip
    assert small.fill({"cpu_core_request": 0.5}) == {
        "gpu_devices_request": 1,
        "gpu_request_type": "memory",
        "gpu_memory_request": "4G",
        "cpu_core_request": 0.5,
        "cpu_core_limit": 2,
    }
    assert small.fill({"gpu_devices_request": 2}) == {
        "gpu_devices_request": 2,
        "cpu_core_request": 1,
        "cpu_core_limit": 2,
    }
