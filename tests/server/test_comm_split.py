"""A workload's communication mode, end to end: from the submit flag through the spec and
the pods' environment to runtime.prepare, and back as the step split that ``describe``,
the metrics API and the workload page show."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import wait_until
from tests.helpers.metrics_api import _admin
from tests.server.conftest import ServerProcess


@pytest.mark.parametrize("flags", [["--grad-compression", "fp16"]], ids=["fp16"])
def test_a_submit_flag_reaches_the_ranks_and_the_split_is_shown(
    server: ServerProcess, flags: list[str]
) -> None:
    sub = server.cli(
        "submit-dist", "pytorch", "digits", "--workers", "1", *flags,
        "--", "python", "-m", "ringleader.examples.digits", "--epochs", "2", "--no-checkpoint",
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    logs = server.cli("logs", "digits", "-f", timeout=300)
    assert logs.returncode == 0, logs.stderr
    assert "ringleader: training with fp16 gradient compression" in logs.stdout
    admin = _admin(server)
    wid = admin.get("/api/v1/workloads", params={"name": "digits"}).json()["workloads"][0]
    wid = wid["workloadId"]
    assert admin.get(f"/api/v1/workloads/{wid}").json()["spec"]["spec"]["gradCompression"] == (
        "fp16"
    )

    def split() -> dict[str, object] | None:
        return admin.get(f"/api/v1/workloads/{wid}/metrics").json().get("stepSplit")

    found = wait_until(split, 60, "a step split")
    assert found["ranks"] == 2 and found["bound"] in ("network", "compute")
    assert found["stepTime"] > 0 and found["commTime"] >= 0
    assert abs(found["computeTime"] + found["commTime"] - found["stepTime"]) < 1e-9
    points = admin.get(f"/api/v1/workloads/{wid}/metrics").json()["series"][0]["points"]
    assert all(p["commTime"] >= 0 for p in points)
    assert all(p["computeTime"] >= 0 for p in points[1:])
    described = server.cli("describe", "digits").stdout
    assert "Communication: fp16 gradient compression" in described
    assert re.search(
        r"Step time: [\d.]+ m?s: compute [\d.]+ m?s, communication [\d.]+ m?s "
        r"\((network|compute)-bound",
        described,
    ), described
    as_json = server.cli("describe", "digits", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["stepSplit"] == found  # the job ended: no new steps


def test_bad_modes_are_refused_naming_the_field_or_flag(server: ServerProcess) -> None:
    admin = _admin(server)
    project = admin.get("/api/v1/org-unit/projects/default").json()["id"]
    for spec, field in (
        ({"gradCompression": "gzip"}, "gradCompression"),
        ({"syncEvery": 0}, "syncEvery"),
        ({"syncEvery": 4, "gradCompression": "powersgd"}, "syncEvery"),
    ):
        body = {"name": "bad", "projectId": project, "spec": {"numWorkers": 1, **spec}}
        answer = admin.post("/api/v1/workloads/distributed", json=body)
        assert answer.status_code == 422, answer.text
        assert field in answer.text
    for flags, flag in (
        (["--grad-compression", "gzip"], "--grad-compression"),
        (["--sync-every", "0"], "--sync-every"),
    ):
        sub = server.cli("submit-dist", "pytorch", "bad", "--workers", "1", *flags, "--", "true")
        assert sub.returncode == 2 and flag in sub.stderr, sub.stderr
        assert "Traceback" not in sub.stderr
    assert all(w["name"] != "bad" for w in admin.get("/api/v1/workloads").json()["workloads"])
