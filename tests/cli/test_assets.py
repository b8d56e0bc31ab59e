"""``ringleader environment ...``, ``ringleader compute ...`` and the assets named at
submit (``--environment-asset``, ``--compute``), against a real server process:
seed 002's UI path (the ``pytorch-dt`` environment and the ``small-fraction``
compute resource) typed as CLI commands, flags winning over assets, roles, and
bad input naming the flag."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import yaml

from ringleader.client import Client
from tests.server.conftest import ServerProcess


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def spec_of(server: ServerProcess, name: str) -> dict[str, Any]:
    """The workload's stored spec, as the server recorded it."""
    creds = json.loads((server.home / "credentials.json").read_text())
    return Client(server.url, creds["clientId"], creds["clientSecret"]).find(name).spec["spec"]


def test_seed_002_assets_made_by_cli_and_named_at_submit(server: ServerProcess) -> None:
    made = ok(
        server.cli(
            "environment", "create", "pytorch-dt", "-i", "kubeflow/pytorch-dist-mnist:latest"
        )
    )
    assert "'pytorch-dt' created" in made and "--environment-asset pytorch-dt" in made
    ok(
        server.cli(
            "compute", "create", "small-fraction", "-g", "0.1", "--cpu", "0.1", "--memory", "100M"
        )
    )
    listed = ok(server.cli("environment", "list"))
    assert re.search(r"pytorch-dt\s+project\s+default\s+kubeflow/pytorch-dist-mnist:latest", listed)
    assert re.search(
        r"small-fraction\s+project\s+default\s+0\.1\s+0\.1\s+100M",
        ok(server.cli("compute", "list")),
    )

    # Seed 002: 2 workers with the environment and small-fraction (the command after --).
    submitted = server.cli(
        "submit-dist", "pytorch", "seed2", "--workers", "2",
        "--environment-asset", "pytorch-dt", "--compute", "small-fraction", "--", "true",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    spec = spec_of(server, "seed2")
    assert spec["image"] == "kubeflow/pytorch-dist-mnist:latest" and spec["command"] == "true"
    assert spec["numWorkers"] == 2
    assert spec["compute"] == {
        "gpuDevicesRequest": 1,
        "gpuRequestType": "portion",
        "gpuPortionRequest": 0.1,
        "cpuCoreRequest": 0.1,
        "cpuMemoryRequest": "100M",
    }

    described = yaml.safe_load(
        ok(server.cli("compute", "describe", "small-fraction", "-o", "yaml"))
    )
    assert described["spec"]["gpuPortionRequest"] == 0.1
    assert described["meta"]["projectName"] == "default"
    shown = ok(server.cli("environment", "describe", "pytorch-dt"))
    assert "kubeflow/pytorch-dist-mnist:latest" in shown and "admin" in shown

    # Deleting an asset leaves what was submitted with it alone.
    assert "deleted" in ok(server.cli("environment", "delete", "pytorch-dt"))
    assert spec_of(server, "seed2")["image"] == "kubeflow/pytorch-dist-mnist:latest"
    gone = server.cli("environment", "describe", "pytorch-dt")
    assert gone.returncode == 4 and "pytorch-dt" in gone.stderr, gone.stderr


def test_flags_win_over_the_assets_values(server: ServerProcess, tmp_path: Any) -> None:
    ok(server.cli(
        "environment", "create", "runner", "-i", "gcr.io/run-ai-demo/quickstart-distributed",
        "--command", "true", "--args", "--epochs=3", "-e", "EPOCHS=3", "-e", "SEED=1", "--working-dir", str(tmp_path),
    ))  # fmt: skip
    ok(server.cli("compute", "create", "halves", "-g", "0.5", "--cpu", "1", "--memory", "1G",
                  "--scope", "tenant", "--description", "half a GPU"))  # fmt: skip

    # Nothing given: every value comes from the assets.
    ok(server.cli("submit-dist", "pytorch", "plain", "--workers", "1",
                  "--environment-asset", "runner", "--compute", "halves"))  # fmt: skip
    plain = spec_of(server, "plain")
    assert plain["command"] == "true" and plain["args"] == "--epochs=3"
    assert plain["workingDir"] == str(tmp_path)
    assert plain["image"] == "gcr.io/run-ai-demo/quickstart-distributed"
    assert {v["name"]: v["value"] for v in plain["environmentVariables"]} == {
        "EPOCHS": "3",
        "SEED": "1",
    }
    assert plain["compute"]["gpuPortionRequest"] == 0.5 and plain["compute"]["cpuCoreRequest"] == 1

    # Flags given: they win, field by field (a GPU request as a whole), the rest stays.
    ok(server.cli(
        "submit-mpi", "flags", "--processes", "1", "--environment-asset", "runner",
        "--compute", "halves", "-g", "2", "--cpu", "0.5", "-e", "EPOCHS=9",
        "--working-dir", "/", "-i", "kubeflow/pytorch-dist-mnist:latest",
        "--command", "--", "echo", "hi",
    ))  # fmt: skip
    flags = spec_of(server, "flags")
    assert flags["command"] == "echo hi" and "args" not in flags  # --command replaces both
    assert flags["workingDir"] == "/" and flags["image"] == "kubeflow/pytorch-dist-mnist:latest"
    assert {v["name"]: v["value"] for v in flags["environmentVariables"]} == {
        "EPOCHS": "9",
        "SEED": "1",
    }
    assert flags["compute"] == {
        "gpuDevicesRequest": 2,
        "cpuCoreRequest": 0.5,
        "cpuMemoryRequest": "1G",
    }

    # The v2 verb takes them too.
    ok(server.cli("distributed", "submit", "v2", "--workers", "1", "--compute", "halves",
                  "--gpu-devices-request", "1", "--", "true"))  # fmt: skip
    assert spec_of(server, "v2")["compute"] == {
        "gpuDevicesRequest": 1, "cpuCoreRequest": 1, "cpuMemoryRequest": "1G"
    }  # fmt: skip

    # An unknown name is an error naming the flag; nothing is submitted.
    for flag in ("--compute", "--environment-asset"):
        bad = server.cli(
            "submit-dist", "pytorch", "nope", "--workers", "1", flag, "nope", "--", "true"
        )
        assert bad.returncode == 2 and flag in bad.stderr and "'nope'" in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
    assert "nope" not in ok(server.cli("list"))


def _secret(out: str) -> tuple[str, str]:
    client_id = re.search(r"Client ID:\s+(\S+)", out)
    secret = re.search(r"Client secret:\s+(\S+)", out)
    assert client_id and secret, out
    return client_id.group(1), secret.group(1)


def test_viewers_read_assets_researchers_make_them_only_admins_share_them(
    server: ServerProcess,
) -> None:
    vera = _secret(ok(server.cli("user", "create", "vera")))
    rita = _secret(ok(server.cli("user", "create", "rita")))
    ok(server.cli("user", "assign", "vera", "default", "--role", "viewer"))
    ok(server.cli("user", "assign", "rita", "default", "--role", "researcher"))
    ok(server.cli("compute", "create", "shared", "-g", "1", "--scope", "tenant"))

    made = server.cli("environment", "create", "ritas", "-i", "img:1", creds=rita)
    assert made.returncode == 0, made.stderr
    tenant = server.cli("compute", "create", "mine", "--scope", "tenant", "--cpu", "1", creds=rita)
    assert tenant.returncode == 6 and "admin" in tenant.stderr, tenant.stderr

    assert "ritas" in ok(server.cli("environment", "list", creds=vera))
    assert "shared" in ok(server.cli("compute", "list", creds=vera))
    refused = server.cli("environment", "create", "veras", "-i", "img:1", creds=vera)
    assert refused.returncode == 6 and "viewer" in refused.stderr, refused.stderr
    deleting = server.cli("environment", "delete", "ritas", creds=vera)
    assert deleting.returncode == 6, deleting.stderr
    assert "deleted" in ok(server.cli("environment", "delete", "ritas", creds=rita))


def test_bad_input_names_the_flag_and_creates_nothing(server: ServerProcess) -> None:
    cases = [
        (("environment", "create", "Bad_Name", "-i", "x"), "NAME"),
        (("environment", "create", "x", "-e", "RANK=1"), "-e/--environment"),
        (("environment", "create", "x", "-e", "novalue"), "-e/--environment"),
        (("environment", "create", "x", "--command", "echo 'open"), "--command"),
        (("environment", "create", "x", "--image-pull-policy", "Sometimes"), "--image-pull-policy"),
        (("environment", "create", "x", "--scope", "galaxy"), "--scope"),
        (("environment", "create", "x", "--scope", "tenant", "-p", "default"), "-p/--project"),
        (("compute", "create", "x", "-g", "1.5"), "-g/--gpu"),
        (("compute", "create", "x", "-g", "0.5", "--gpu-memory", "4G"), "-g/--gpu"),
        (("compute", "create", "x", "--memory", "lots"), "--memory"),
        (("compute", "create", "x", "--cpu", "-1"), "--cpu"),
        (("compute", "create", "x", "--description", "d" * 300), "--description"),
        (("environment", "list", "-o", "xml"), "-o/--output"),
    ]
    for args, flag in cases:
        result = server.cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert flag in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
    missing = server.cli("environment", "create", "x", "-p", "nope")
    assert missing.returncode == 4 and "nope" in missing.stderr, missing.stderr
    unknown = server.cli("compute", "create", "x", "--gpus", "1")
    assert unknown.returncode == 2 and "--gpus" in unknown.stderr
    assert json.loads(ok(server.cli("environment", "list", "-A", "-o", "json"))) == []
    assert json.loads(ok(server.cli("compute", "list", "-o", "json"))) == []


def test_the_client_creates_reads_updates_finds_and_deletes_both_kinds(
    server: ServerProcess,
) -> None:
    """Every asset method of the Python SDK, against the real server: what comes back
    is the stored asset, and a deleted one is gone."""
    from ringleader.errors import NotFound
    from ringleader.server import asset_schemas as assets
    from ringleader.server import compute_asset_schemas as resources

    creds = json.loads((server.home / "credentials.json").read_text())
    c = Client(server.url, creds["clientId"], creds["clientSecret"])
    meta = {"scope": "project", "projectId": "default"}
    env = c.create_environment(
        assets.EnvironmentCreationRequest.model_validate(
            {"meta": {"name": "sdk-env", **meta}, "spec": {"image": "img:1"}}
        )
    )
    compute = c.create_compute_resource(
        resources.ComputeCreationRequest.model_validate(
            {"meta": {"name": "sdk-cpu", **meta}, "spec": {"cpuCoreRequest": 0.5}}
        )
    )
    assert (env.spec.image, compute.spec.cpu_core_request) == ("img:1", 0.5)
    assert c.environment(env.meta.id).meta.name == "sdk-env"
    assert c.compute_resource(compute.meta.id).meta.name == "sdk-cpu"
    assert [e.meta.id for e in c.environments("default", name="sdk-env")] == [env.meta.id]
    assert [e.meta.id for e in c.compute_resources("default")] == [compute.meta.id]
    changed = c.update_environment(
        env.meta.id,
        assets.EnvironmentUpdateRequest.model_validate(
            {"meta": {"name": "sdk-env", "description": "d"}, "spec": {"image": "img:2"}}
        ),
    )
    assert (changed.spec.image, c.find_environment("sdk-env").spec.image) == ("img:2", "img:2")
    bigger = c.update_compute_resource(
        compute.meta.id,
        resources.ComputeUpdateRequest.model_validate(
            {"meta": {"name": "sdk-cpu"}, "spec": {"cpuCoreRequest": 2}}
        ),
    )
    assert bigger.spec.cpu_core_request == c.find_compute_resource("sdk-cpu").spec.cpu_core_request
    assert bigger.spec.cpu_core_request == 2
    c.delete_environment(env.meta.id)
    c.delete_compute_resource(compute.meta.id)
    for gone in (lambda: c.environment(env.meta.id), lambda: c.find_compute_resource("sdk-cpu")):
        try:
            gone()
        except NotFound:
            continue
        raise AssertionError("a deleted asset is still there")
