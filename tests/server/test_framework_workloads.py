"""TensorFlow, JAX and XGBoost workloads on a real server (issue 25), as a user types
them: ``submit-dist tf``, ``submit-dist jax``, ``training xgboost submit``; each framework's pods, its
program trained across them, its TYPE in ``list``; and what does not fit refused
naming the flag, with nothing created.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require
from tests.server.conftest import API, ServerProcess, api, stop_workloads

__all__ = ["api"]  # the fixture, used by name


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(tmp_path / "home", "--run-as", "server")
    running.start()
    try:
        yield running
    finally:
        running.kill()
        stop_workloads(running.home)


def test_tf_jax_and_xgboost_programs_train_as_workloads_with_their_pods(
    server: ServerProcess, tmp_path: Path
) -> None:
    for package in ("tensorflow", "jax", "xgboost"):
        require(importlib.util.find_spec(package) is not None, f"{package} (the examples extra)")
    jax = server.cli("submit-dist", "jax", "jx", "--workers", "2", "--", "python", "-m",
                     "ringleader.examples.jax_digits", "--steps", "50", cwd=str(tmp_path))  # fmt: skip
    assert jax.returncode == 0, jax.stderr
    assert "ringleader bash jx" not in jax.stdout  # not interactive: no shell to offer
    xgb = server.cli("training", "xgboost", "submit", "xg", "--workers", "1", "--", "python",
                     "-m", "ringleader.examples.xgboost_digits", "--rounds", "10",
                     cwd=str(tmp_path))  # fmt: skip
    assert xgb.returncode == 0, xgb.stderr
    assert "ringleader training describe xg" in xgb.stdout, xgb.stdout  # v2's words next
    tf = server.cli("submit-dist", "tf", "tfw", "--workers", "1", "--", "python", "-m",
                    "ringleader.examples.tf_digits", "--steps", "50", cwd=str(tmp_path))  # fmt: skip
    assert tf.returncode == 0, tf.stderr
    for name in ("jx", "xg", "tfw"):
        described = server.wait_status(name, {"Completed", "Failed"})
        assert "Status: Completed" in described, described
    jx_logs = server.cli("logs", "jx").stdout
    assert "[jx-worker-0] psum of process ids: 1 (2 processes)" in jx_logs, jx_logs
    assert re.search(r"\[jx-worker-0\] final test accuracy: 0\.[89]", jx_logs), jx_logs
    xg_logs = server.cli("training", "xgboost", "logs", "xg").stdout
    assert "[xg-master-0] rank 0 of 2: 719 training rows here" in xg_logs, xg_logs
    assert re.search(r"\[xg-master-0\] final test accuracy: 0\.9", xg_logs), xg_logs
    tf_logs = server.cli("logs", "tfw").stdout
    assert "[tfw-chief-0] workers: 2" in tf_logs, tf_logs
    assert re.search(r"\[tfw-chief-0\] final test accuracy: 0\.[89]", tf_logs), tf_logs
    listed = server.cli("training", "list").stdout
    assert re.search(r"tfw\s+Completed.*TF distributed", listed), listed
    assert re.search(r"jx\s+Completed.*JAX distributed", listed), listed
    assert re.search(r"xg\s+Completed.*XGBoost distributed", listed), listed
    pods = server.cli("describe", "jx").stdout
    assert "jx-worker-1" in pods and "jx-master" not in pods, pods


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["submit-dist", "tf", "t1", "--processes", "2"], "no such option: --processes"),
        (["submit-dist", "xgboost", "x1", "--workers", "1", "-g", "0.5"],
         "-g: XGBoost pods take whole GPUs (gpuPortionRequest 0.5)"),
        (["training", "tf", "submit", "t2", "--workers", "0"],
         "--workers: Input should be greater than or equal to 1"),
        (["distributed", "submit", "t3", "--framework", "keras", "--workers", "1"],
         "--framework: unknown framework 'keras'; choose one of PyTorch, MPI, TF, XGBoost, JAX"),
    ],
)  # fmt: skip
def test_what_a_framework_does_not_take_is_refused_naming_the_flag(
    server: ServerProcess, argv: list[str], said: str
) -> None:
    done = server.cli(*argv, "--", "true")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert argv[2 if argv[0] != "training" else 3] not in server.cli("list").stdout


def test_a_master_spec_for_a_framework_without_a_master_is_refused(api: API) -> None:
    body = {"name": "jm", "projectId": api.project_id(), "masterSpecSameAsWorker": False,
            "masterSpec": {"command": "true"},
            "spec": {"command": "true", "numWorkers": 2, "distributedFramework": "JAX"}}  # fmt: skip
    refused = api.post("/api/v1/workloads/distributed", json=body)
    assert refused.status_code == 422, refused.text
    assert "masterSpec" in refused.text and "no master pod" in refused.text, refused.text
    assert api.get("/api/v1/workloads").json()["workloads"] == []


def test_export_kubeflow_writes_a_submitted_workload_as_kubeflow_runs_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The CLI end to end: the workload read back from the server, its framework's job
    written to a file, what cannot map refused naming the flag (golden manifests:
    tests/export)."""
    import yaml

    done = server.cli("submit-dist", "tf", "tfx", "--workers", "1", "-e", "LR=0.1", "--",
                      "python", "train.py", cwd=str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    imageless = server.cli("export", "kubeflow", "tfx")
    assert imageless.returncode == 2 and "--image: workload 'tfx' names no image" in (
        imageless.stderr), imageless.stderr  # fmt: skip
    target = tmp_path / "tfx.yaml"
    wrote = server.cli("export", "kubeflow", "tfx", "--image", "team/train:1", "-o", str(target))
    assert wrote.returncode == 0 and f"wrote TFJob tfx to {target}" in wrote.stderr, wrote.stderr
    job = yaml.safe_load(target.read_text())
    assert (job["kind"], job["metadata"]["namespace"]) == ("TFJob", "default")
    chief = job["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
    assert chief["command"] == ["python", "train.py"] and chief["image"] == "team/train:1"
    assert {"name": "LR", "value": "0.1"} in chief["env"]
    assert job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1
    v2 = server.cli("export", "kubeflow", "tfx", "--image", "i", "--trainer-v2")
    assert v2.returncode == 2 and "--runtime: Kubeflow Trainer ships no built-in" in v2.stderr
    missing = server.cli("export", "kubeflow", "nothing-so-named")
    assert missing.returncode != 0 and "nothing-so-named" in missing.stderr
    assert "Traceback" not in imageless.stderr + v2.stderr + missing.stderr


def test_the_list_filters_by_framework(api: API) -> None:
    for name, framework in (("lt", "TF"), ("lj", "JAX"), ("lp", "PyTorch")):
        created = api.submit(name, "true", distributedFramework=framework)
        assert created.status_code == 202, created.text
    found = api.get("/api/v1/workloads", params={"filterBy": "framework==JAX"}).json()
    assert [(w["name"], w["framework"]) for w in found["workloads"]] == [("lj", "JAX")]
    others = api.get("/api/v1/workloads", params={"filterBy": "framework!=JAX"}).json()
    assert sorted(w["name"] for w in others["workloads"]) == ["lp", "lt"]


def test_exec_and_bash_go_to_the_head_pod_or_to_worker_0_where_all_are_workers() -> None:
    from ringleader.errors import NotFound
    from ringleader.server.services.exec import pick_pod

    tf = ["t-chief-0", "t-worker-0"]
    assert pick_pod(tf, ["t-chief-0"], "t", None) == "t-chief-0"
    jax = ["j-worker-0", "j-worker-1"]
    assert pick_pod(jax, [], "j", None) == "j-worker-0"  # JAX's coordinator, process 0
    assert pick_pod(jax, [], "j", "worker-1") == "j-worker-1"
    with pytest.raises(NotFound):
        pick_pod([], [], "gone", None)
