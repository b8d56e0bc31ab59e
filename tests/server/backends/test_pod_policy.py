"""cleanPodPolicy, interactive pods and exec targets on the local backend, with real ranks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ringleader.errors import Conflict, InvalidSpec, NotFound
from ringleader.server.backends.local import LocalBackend
from tests.conftest import job_pids, wait_until
from tests.helpers.local_backend import make_request, pods, wait_final, wait_lines

# Rank 0 ends at once; rank 1 (worker-0) does what argv[1] says; rank 2 ends at once.
RANK0_FIRST = """
import os, sys, time
from pathlib import Path
rank = int(os.environ["RANK"])
if rank == 1:
    print("ready", flush=True)
    mode = sys.argv[1]
    if mode == "hang":
        time.sleep(300)
    elif mode == "fail-late":
        while not Path(sys.argv[2] + ".go").exists():
            time.sleep(0.02)
        time.sleep(0.3)
        sys.exit(3)
    elif mode == "wait-file":
        while not Path(sys.argv[2]).exists():
            time.sleep(0.05)
        print("file seen, leaving", flush=True)
elif rank == 0:
    while not Path(sys.argv[2] + ".go").exists():
        time.sleep(0.02)
print("done", rank, flush=True)
"""


@pytest.fixture
def backend() -> LocalBackend:
    return LocalBackend(grace_s=1.0)


def _submit(backend: LocalBackend, script, tmp_path: Path, mode: str, **spec) -> tuple[str, str]:
    flag = tmp_path / "flag"
    request = make_request(
        tmp_path / "run", command=f"python {script(RANK0_FIRST)} {mode} {flag}", **spec
    )
    handle = backend.start(request)
    wait_lines(backend, handle, "ready", 1)
    Path(f"{flag}.go").touch()  # only now may rank 0 finish: the worker is surely running
    return handle, f"rl-{request.workload_id}"


def test_running_policy_stops_pods_still_running_when_the_master_completes(
    backend, script, tmp_path
) -> None:
    handle, job = _submit(backend, script, tmp_path, "hang", backoffLimit=2)
    status = wait_final(backend, handle, timeout=30)
    assert status.phase == "Completed" and status.attempt == 0
    phases = pods(status)
    assert phases["job-master-0"] == ("Succeeded", 0)
    assert phases["job-worker-0"][0] == "Stopped"  # hung: stopped after the grace period
    assert phases["job-worker-1"] == ("Succeeded", 0)
    assert job_pids(job) == []


def test_a_worker_failing_after_the_master_completed_is_no_restart(script, tmp_path) -> None:
    patient = LocalBackend(grace_s=10.0)  # the worker fails well inside its grace
    handle, job = _submit(patient, script, tmp_path, "fail-late", backoffLimit=2)
    status = wait_final(patient, handle, timeout=30)
    assert status.phase == "Completed" and status.attempt == 0  # no gang restart
    assert pods(status)["job-worker-0"] == ("Failed", 3)
    assert job_pids(job) == []


def test_none_policy_leaves_pods_running_after_the_master_completes(
    backend, script, tmp_path
) -> None:
    handle, job = _submit(backend, script, tmp_path, "wait-file", cleanPodPolicy="None")
    status = wait_until(
        lambda: (s := backend.poll(handle)).phase == "Completed" and s, 30, "Completed"
    )
    assert pods(status)["job-worker-0"] == ("Running", None)
    assert "cleanPodPolicy None" in status.message and "job-worker-0" in status.message
    assert job_pids(job) != []  # the worker really runs on
    (tmp_path / "flag").touch()
    wait_lines(backend, handle, "file seen, leaving", 1)
    status = wait_until(
        lambda: (s := backend.poll(handle)) and pods(s)["job-worker-0"][0] == "Succeeded" and s,
        30,
        "the lingering worker to end",
    )
    assert status.phase == "Completed"
    wait_until(lambda: job_pids(job) == [], 10, "no processes left")


def test_none_policy_pods_are_stopped_by_cancel(backend, script, tmp_path) -> None:
    handle, job = _submit(backend, script, tmp_path, "hang", cleanPodPolicy="None")
    wait_until(lambda: backend.poll(handle).phase == "Completed", 30, "Completed")
    backend.cancel(handle)
    assert job_pids(job) == []


def test_interactive_pods_outlive_their_command_and_expose_an_exec_target(
    backend, script, tmp_path
) -> None:
    body = "import os; print('trained', os.environ['RANK'], flush=True)"
    request = make_request(
        tmp_path / "run", command=f"python {script(body)}", interactive=True, workers=1
    )
    handle = backend.start(request)
    wait_lines(backend, handle, "stays up", 2)  # the hold's notice, once per rank
    assert {ln.text for ln in backend.logs(handle) if ln.stream == "stdout"} == {
        "trained 0",
        "trained 1",
    }
    status = backend.poll(handle)
    assert status.phase == "Running"
    assert {p.phase for p in status.pods} == {"Running"}
    target = backend.exec_target(handle, "job-worker-0")
    assert target.env["RANK"] == "1" and target.env["WORLD_SIZE"] == "2"
    assert target.env["RINGLEADER_JOB_ID"] == f"rl-{request.workload_id}"
    assert target.cwd == str(tmp_path / "run" / "work")
    assert backend.exec_target(handle, "job-master-0").env["RANK"] == "0"
    with pytest.raises(NotFound):
        backend.exec_target(handle, "job-worker-7")
    backend.cancel(handle)
    assert backend.poll(handle).phase == "Stopped"
    assert job_pids(f"rl-{request.workload_id}") == []
    with pytest.raises(Conflict, match="--interactive"):
        backend.exec_target(handle, "job-master-0")


def test_interactive_without_a_command_just_holds(backend, tmp_path) -> None:
    request = make_request(tmp_path / "run", interactive=True, workers=1)
    handle = backend.start(request)
    target = wait_until(
        lambda: _target_or_none(backend, handle, "job-master-0"), 30, "the master pod's process"
    )
    assert target.env["RANK"] == "0" and os.path.isdir(target.cwd)
    assert backend.poll(handle).phase == "Running"
    backend.cancel(handle)
    assert job_pids(f"rl-{request.workload_id}") == []


def _target_or_none(backend: LocalBackend, handle: str, pod: str):
    try:
        return backend.exec_target(handle, pod)
    except Conflict:
        return None


def test_ranks_get_only_the_allow_listed_part_of_the_servers_environment(script, tmp_path) -> None:
    server_env = {
        **os.environ,
        "RINGLEADER_DATABASE_URL": "postgresql+psycopg://rl:s3cret@db/rl",
        "RINGLEADER_CLIENT_SECRET": "s3cret",
        "USER_THING": "not a pod's",
        "LC_ALL": "C.UTF-8",
    }
    backend = LocalBackend(grace_s=1.0, environ=server_env)
    body = (
        "import os; print(sorted(k for k in os.environ if 'DATABASE' in k or 'SECRET' in k),"
        " os.environ.get('USER_THING'), os.environ.get('LC_ALL'))"
    )
    request = make_request(tmp_path / "run", command=f"python {script(body)}", workers=1)
    handle = backend.start(request)
    assert wait_final(backend, handle).phase == "Completed"
    printed = {ln.text for ln in backend.logs(handle) if ln.stream == "stdout"}
    assert printed == {"[] None C.UTF-8"}  # README "Pod environment"


def test_more_ranks_than_the_machine_can_run_is_refused_before_any_start(tmp_path) -> None:
    backend = LocalBackend(max_ranks=8)
    request = make_request(tmp_path / "run", command="true", workers=8)  # 9 ranks
    with pytest.raises(InvalidSpec, match="9 ranks do not fit") as err:
        backend.start(request)
    assert err.value.where == "spec.numWorkers"
    assert not (tmp_path / "run" / "state.json").exists()
