"""The local backend: golden plans, then real detached supervisors to every kind of end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ringleader.errors import Conflict, InvalidSpec, NotFound
from ringleader.hosts import Host
from ringleader.launch.detached import LaunchFile
from ringleader.launch.plan import LaunchSpec, NodeFacts, build_plan
from ringleader.launch.run_logs import format_log_line, parse_log_file_name, parse_log_line
from ringleader.server.backends.base import BackendRequest
from ringleader.server.backends.local import LocalBackend, LocalPlan, LocalPod, pod_phase
from tests.conftest import job_pids, require, wait_until
from tests.helpers.local_backend import PY, make_request, pods, wait_final, wait_lines


@pytest.fixture
def backend() -> LocalBackend:
    return LocalBackend(grace_s=2.0)


def state(handle: str) -> dict[str, Any]:
    return json.loads((Path(handle) / "state.json").read_text())


# ----- plan (pure, golden) -------------------------------------------------------


def test_pytorch_plan_is_a_master_and_n_workers_on_localhost() -> None:
    request = make_request(
        "/runs/w1/",
        name="mnist",
        workload_id="w1",
        command="python train.py",
        args="--epochs 3 --lr '0.1'",
        backoffLimit=2,
        environmentVariables=[{"name": "FOO", "value": "bar"}],
    )
    plan = LocalBackend(python=PY, grace_s=3.0).plan(request)
    assert plan == LocalPlan(
        spec=LaunchSpec(
            command=[PY, "train.py", "--epochs", "3", "--lr", "0.1"],
            hosts=[Host("localhost", "127.0.0.1", 3)],
            run_id="rl-w1",
            cwd="/runs/w1/work",
            python=PY,
            framework="pytorch",
            max_restarts=2,
            grace_s=3.0,
            env={
                "FOO": "bar",
                "RINGLEADER_WORKLOAD_ID": "w1",
                "RINGLEADER_WORKLOAD_NAME": "mnist",
                "RINGLEADER_PROJECT": "team-a",
                "RUNAI_JOB_NAME": "mnist",
                "RUNAI_PROJECT": "team-a",
                "RUNAI_MPI_NUM_WORKERS": "2",
                "JOB_NAME": "mnist",
                "JOB_UUID": "w1",
                "RINGLEADER_CHECKPOINT_DIR": "/runs/w1/checkpoints",
                "RINGLEADER_METRICS_DIR": "/runs/w1/metrics",
            },
            on_rank0_success="stop-rest",  # cleanPodPolicy Running (the default)
        ),
        framework="pytorch",
        pods=(
            LocalPod("mnist-master-0", "master", 0, (0,)),
            LocalPod("mnist-worker-0", "worker", 0, (1,)),
            LocalPod("mnist-worker-1", "worker", 1, (2,)),
        ),
        run_dir="/runs/w1",
    )
    launch = plan.launch_file()
    assert launch.to_json()["pods"][1] == {
        "name": "mnist-worker-0",
        "role": "worker",
        "index": 0,
        "ranks": [1],
        "node": "",
    }
    assert LaunchFile.from_json(json.loads(json.dumps(launch.to_json()))) == launch


def test_scheduler_bindings_become_each_ranks_devices_share_threads_and_node() -> None:
    from ringleader.sched import GpuShare
    from ringleader.server.backends.base import PodPlacement

    request = make_request("/runs/w3", name="frac", workers=1, command="python t.py",
                           environmentVariables=[{"name": "OMP_NUM_THREADS", "value": "3"}])  # fmt: skip
    placements = {
        "frac-master-0": PodPlacement("sim-0", "simulated", (GpuShare(2, 0.25),), cpu_cores=4.5),
        "frac-worker-0": PodPlacement("sim-1", "simulated", (GpuShare(0), GpuShare(1)), 2),
    }
    request = BackendRequest(**{**request.__dict__, "placements": placements})
    plan = LocalBackend(python=PY).plan(request)
    assert plan.spec.rank_env == {
        "0": {
            "RINGLEADER_POD": "frac-master-0",
            "RINGLEADER_NODE": "sim-0",
            "RINGLEADER_NODE_KIND": "simulated",
            "NODE_NAME": "sim-0",
            "RUNAI_NUM_OF_GPUS": "0.25",
            "CUDA_VISIBLE_DEVICES": "2",
            "RINGLEADER_POD_GPUS": "1",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "RINGLEADER_GPU_FRACTION": "0.25",
        },  # OMP_NUM_THREADS: the user's own 3 wins over the request's 4
        "1": {
            "RINGLEADER_POD": "frac-worker-0",
            "RINGLEADER_NODE": "sim-1",
            "RINGLEADER_NODE_KIND": "simulated",
            "NODE_NAME": "sim-1",
            "RUNAI_NUM_OF_GPUS": "2",
            "CUDA_VISIBLE_DEVICES": "0,1",
            "RINGLEADER_POD_GPUS": "2",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        },
    }
    assert [p.node for p in plan.pods] == ["sim-0", "sim-1"]
    facts = [NodeFacts(cores=2, rundir="/runs/w3/agent")]
    ranks = build_plan(plan.spec, facts, attempt=0, master_addr="127.0.0.1", master_port=1)
    envs = [r.env for r in ranks.nodes[0].ranks]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["2", "0,1"]
    assert [e["OMP_NUM_THREADS"] for e in envs] == ["3", "3"]


def test_pods_on_ssh_nodes_become_the_launchs_hosts_and_restarts_the_servers() -> None:
    from ringleader.server.backends.base import PodPlacement
    from ringleader.server.backends.ssh import NodeBook, SSHBackend, SSHNode

    request = make_request("/runs/w4", name="far", workers=3, command="python t.py",
                           backoffLimit=4)  # fmt: skip
    placements = {
        "far-master-0": PodPlacement("gpu1", "ssh", cpu_cores=1),
        "far-worker-0": PodPlacement("gpu1", "ssh", cpu_cores=1),
        "far-worker-1": PodPlacement("gpu2", "ssh"),
        "far-worker-2": PodPlacement("gpu1", "ssh"),
    }
    request = BackendRequest(**{**request.__dict__, "placements": placements})
    # The login targets live in the SSH backend's book, not in the request.
    book = NodeBook({"gpu1": SSHNode("me@gpu1", "10.0.0.1"), "gpu2": SSHNode("gpu2", "10.0.0.2")})
    backend = SSHBackend(python=PY, book=book)
    plan = backend.plan(request)
    # Ranks fill hosts in order: consecutive pods on one node are one host.
    assert plan.spec.hosts == [
        Host("me@gpu1", "10.0.0.1", 2), Host("gpu2", "10.0.0.2", 1), Host("me@gpu1", "10.0.0.1", 1)
    ]  # fmt: skip
    assert [p.node for p in plan.pods] == ["gpu1", "gpu1", "gpu2", "gpu1"]
    assert plan.spec.max_restarts == 0  # a restart goes back to the scheduler
    assert not backend.capabilities.restarts_in_place
    assert "RINGLEADER_CPU_AFFINITY" not in plan.spec.rank_env["0"]  # not this machine's cores
    assert plan.spec.rank_env["2"]["RINGLEADER_NODE_KIND"] == "ssh"
    assert backend.plan(request) == plan  # pure: the same request, the same plan


def test_probe_answers_become_capacity_and_readiness() -> None:
    from ringleader.server.ssh_nodes import node_state

    facts = {
        "hostname": "gpu1", "cpu_cores": 64, "memory_bytes": 512 * 2**30, "os": "Linux",
        "gpus": [{"index": 0, "model": "H100", "memoryBytes": 80 * 2**30}, {"bogus": 1}],
        "python": PY, "python_version": "3.11.7", "torch": "2.13.0", "ringleader": "0.1.0",
    }  # fmt: skip
    state = node_state(facts, PY, probed_at=1.0)
    assert (state.cpu_cores, state.memory_bytes, state.ready, state.message) == (
        64, 512 * 2**30, True, ""
    )  # fmt: skip
    assert state.gpus == [{"index": 0, "model": "H100", "memoryBytes": 80 * 2**30}]
    assert state.facts["torch"] == "2.13.0" and state.facts["probed_at"] == 1.0
    missing = node_state({**facts, "ringleader": None}, PY, probed_at=1.0)
    assert not missing.ready and "ringleader install" in missing.message and PY in missing.message


def test_a_nodes_broken_podman_is_said_and_its_node_gets_no_image_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime whose ``version`` fails is no runtime (no image pods go there), and
    ``nodes list`` says why; process pods still may."""
    from ringleader.cli.top import runtime_of
    from ringleader.cluster import probe
    from ringleader.server import models
    from ringleader.server.snapshot import to_sched_node
    from ringleader.server.ssh_nodes import node_state

    broken = tmp_path / "podman"
    broken.write_text("#!/bin/sh\necho 'Error: database is locked' >&2\nexit 125\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker either
    assert probe.container_runtime() == ("", "podman version: Error: database is locked")
    facts = {**probe.node(), "ringleader": "0.1.0"}
    state = node_state(facts, PY, probed_at=1.0)
    assert state.ready and state.facts["containerRuntime"] == ""
    row = models.Node(name="n1", kind="ssh", cpu_cores=2, memory_bytes=2**30, gpus=[],
                      pool="default", labels={}, ready=True, facts=state.facts)  # fmt: skip
    assert not to_sched_node(row).runs_images
    assert runtime_of(SimpleNamespace(facts=state.facts)) == (  # type: ignore[arg-type]
        "container runtime broken (podman version: Error: database is locked): no image pods"
    )


def test_mpi_ranks_pick_their_own_binding_from_the_exported_map() -> None:
    from ringleader.launch.mpi_rank import rank_environment

    table = json.dumps({"0": {"CUDA_VISIBLE_DEVICES": "3"}, "1": {"CUDA_VISIBLE_DEVICES": "1"}})
    env = rank_environment({"OMPI_COMM_WORLD_RANK": "1", "RINGLEADER_RANK_ENV": table})
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "RINGLEADER_RANK_ENV" not in env
    assert "CUDA_VISIBLE_DEVICES" not in rank_environment({"RINGLEADER_RANK_ENV": "[1]"})


def test_mpi_plan_is_a_launcher_and_workers_with_slots() -> None:
    request = make_request(
        "/runs/w2",
        name="dist",
        workload_id="w2",
        slotsPerWorker=2,
        distributedFramework="MPI",
        command="python -m mpi4py.bench helloworld",
        workingDir="/data/src",
    )
    request = BackendRequest(**{**request.__dict__, "attempt_offset": 1})
    plan = LocalBackend(python=PY, grace_s=3.0).plan(request)
    assert plan == LocalPlan(
        spec=LaunchSpec(
            command=[PY, "-m", "mpi4py.bench", "helloworld"],
            hosts=[Host("localhost", "127.0.0.1", 4)],
            run_id="rl-w2",
            cwd="/data/src",
            python=PY,
            framework="mpi",
            max_restarts=5,  # backoffLimit 6, one attempt already used before a resume
            grace_s=3.0,
            env={
                "RINGLEADER_WORKLOAD_ID": "w2",
                "RINGLEADER_WORKLOAD_NAME": "dist",
                "RINGLEADER_PROJECT": "team-a",
                "RUNAI_JOB_NAME": "dist",
                "RUNAI_PROJECT": "team-a",
                "RUNAI_MPI_NUM_WORKERS": "2",
                "JOB_NAME": "dist",
                "JOB_UUID": "w2",
                "RINGLEADER_CHECKPOINT_DIR": "/runs/w2/checkpoints",
                "RINGLEADER_METRICS_DIR": "/runs/w2/metrics",
            },
        ),
        framework="mpi",
        pods=(
            LocalPod("dist-launcher", "launcher", 0, (-1,)),
            LocalPod("dist-worker-0", "worker", 0, (0, 1)),
            LocalPod("dist-worker-1", "worker", 1, (2, 3)),
        ),
        run_dir="/runs/w2",
        attempt_offset=1,
    )


def test_plan_rejects_a_missing_command_and_other_frameworks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(InvalidSpec) as err:
        LocalBackend().plan(make_request("/runs/x"))
    assert err.value.where == "spec.command"
    from ringleader.launch import frameworks

    # A framework the spec may name but no module registers (a plug-in not loaded).
    monkeypatch.setattr(frameworks, "by_spec_name", lambda _name: None)
    with pytest.raises(InvalidSpec) as err:
        LocalBackend().plan(make_request("/runs/x", command="train", distributedFramework="TF"))
    assert err.value.where == "spec.distributedFramework"
    # Launch-only frameworks (Horovod's) are not named among what a workload may be.
    assert err.value.problem.startswith("the local backend runs PyTorch and MPI and TF"), err.value
    assert "None" not in err.value.problem


def test_log_line_and_file_name_formats() -> None:
    line = format_log_line(1712345678.1234, "a  b\rc")
    assert line == "1712345678.123 a  b\rc\n"
    assert parse_log_line(line) == (1712345678.123, "a  b\rc")
    assert parse_log_line("1.000 ") == (1.0, "")
    assert parse_log_line("no stamp here") == (None, "no stamp here")
    assert parse_log_file_name("rank-12.stderr") == (12, "stderr")
    assert parse_log_file_name("mpirun.stderr") == (-1, "stderr")
    assert parse_log_file_name("rank-x.stdout") is None and parse_log_file_name("notes.txt") is None


def test_pod_phase_rules() -> None:
    assert pod_phase([]) == "Pending"
    assert pod_phase(["Running", "Succeeded"]) == "Running"
    assert pod_phase(["Running", "Failed"]) == "Failed"
    assert pod_phase(["Succeeded", "Succeeded"]) == "Succeeded"
    assert pod_phase(["Succeeded", "Stopped"]) == "Stopped"


# ----- real runs -----------------------------------------------------------------

HELLO = """
import os, sys
print("hello", os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["RUNAI_MPI_NUM_WORKERS"],
      os.environ["RINGLEADER_WORKLOAD_NAME"], os.getcwd())
print("to-stderr", os.environ["RANK"], file=sys.stderr)
"""


def test_pytorch_workload_completes_with_pods_and_logs(backend, script, tmp_path) -> None:
    request = make_request(tmp_path / "run", name="hi", command=f"python {script(HELLO)}")
    handle = backend.start(request)
    assert backend.poll(handle).phase in ("Initializing", "Running", "Completed")
    status = wait_final(backend, handle)
    assert status.phase == "Completed" and status.exit_code == 0 and status.attempt == 0
    assert pods(status) == {
        "hi-master-0": ("Succeeded", 0),
        "hi-worker-0": ("Succeeded", 0),
        "hi-worker-1": ("Succeeded", 0),
    }
    assert [p.ranks for p in status.pods] == [(0,), (1,), (2,)]
    lines = list(backend.logs(handle))
    work = str(tmp_path / "run" / "work")
    hello = {line.pod: line.text for line in lines if line.stream == "stdout"}
    assert hello == {
        f"hi-{pod}": f"hello {rank} 3 2 hi {work}"
        for rank, pod in enumerate(["master-0", "worker-0", "worker-1"])
    }
    assert all(line.time and line.attempt == 0 for line in lines)
    assert [line.time for line in lines] == sorted(line.time for line in lines)
    only = sorted((ln.stream, ln.text) for ln in backend.logs(handle, pod="hi-worker-1"))
    assert only == [("stderr", "to-stderr 2"), ("stdout", f"hello 2 3 2 hi {work}")]
    assert list(backend.logs(handle, tail=2)) == lines[-2:]
    with pytest.raises(NotFound):
        list(backend.logs(handle, pod="hi-worker-9"))
    assert job_pids(f"rl-{request.workload_id}") == []


ALL_REDUCE = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("sum", int(t.item()), "world", dist.get_world_size())
dist.destroy_process_group()
"""


def test_gloo_all_reduce_across_master_and_workers(backend, script, tmp_path) -> None:
    require(_have_torch(), "torch")
    handle = backend.start(
        make_request(tmp_path / "run", name="ar", command=f"python {script(ALL_REDUCE)}")
    )
    status = wait_final(backend, handle, timeout=180)
    assert status.phase == "Completed", state(handle).get("summary")
    sums = sorted((ln.pod, ln.text) for ln in backend.logs(handle) if ln.stream == "stdout")
    assert sums == [
        ("ar-master-0", "sum 6 world 3"),
        ("ar-worker-0", "sum 6 world 3"),
        ("ar-worker-1", "sum 6 world 3"),
    ]


FAIL_RANK_1 = """
import os, subprocess, sys, time
subprocess.Popen(["sleep", "300"])
if os.environ["RANK"] == "1":
    print("bad batch", file=sys.stderr)
    sys.exit(7)
time.sleep(300)
"""


def test_failure_respects_backoff_limit_and_names_the_root_cause(backend, script, tmp_path) -> None:
    request = make_request(
        tmp_path / "run", name="bad", command=f"python {script(FAIL_RANK_1)}", backoffLimit=1
    )
    handle = backend.start(request)
    status = wait_final(backend, handle)
    assert status.phase == "Failed" and status.exit_code == 7
    assert status.attempt == 1  # attempts 0 and 1: one restart, as backoffLimit allows
    assert status.message.splitlines()[0] == "rank 1 on localhost: exit code 7"
    assert "Root Cause (first observed failure)" in status.message
    assert pods(status) == {
        "bad-master-0": ("Stopped", 143),
        "bad-worker-0": ("Failed", 7),
        "bad-worker-1": ("Stopped", 143),
    }
    summary = state(handle)["summary"]
    assert (
        "bad batch" in summary and "attempt 0: rank 1" in summary and "attempt 1: rank 1" in summary
    )
    errs = [(ln.attempt, ln.pod) for ln in backend.logs(handle) if ln.text == "bad batch"]
    assert errs == [(0, "bad-worker-0"), (1, "bad-worker-0")]
    assert job_pids(f"rl-{request.workload_id}") == []


READY_THEN_WAIT = """
import os, subprocess, sys, time
subprocess.Popen(["sleep", "300"])
print("ready", flush=True)
if os.path.exists(sys.argv[1]) or not sys.argv[1]:
    time.sleep(300)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


def test_cancel_while_running_stops_everything(backend, script, tmp_path) -> None:
    request = make_request(tmp_path / "run", command=f"python {script(READY_THEN_WAIT)} ''")
    handle = backend.start(request)
    wait_lines(backend, handle, "ready", 3)
    assert backend.poll(handle).phase == "Running"
    assert job_pids(f"rl-{request.workload_id}") != []
    backend.cancel(handle)
    assert job_pids(f"rl-{request.workload_id}") == []
    status = backend.poll(handle)
    assert status.phase == "Stopped" and status.message.startswith("stopped by SIGTERM")
    assert {p.phase for p in status.pods} == {"Stopped"}
    backend.cancel(handle)  # idempotent
    assert backend.poll(handle).phase == "Stopped"


def test_cancel_right_after_submit_is_stopped(backend, script, tmp_path) -> None:
    request = make_request(tmp_path / "run", command=f"python {script(READY_THEN_WAIT)} ''")
    handle = backend.start(request)
    backend.cancel(handle)
    assert backend.poll(handle).phase == "Stopped"
    assert job_pids(f"rl-{request.workload_id}") == []


def test_missing_working_dir_fails_before_any_rank(backend, tmp_path) -> None:
    request = make_request(tmp_path / "run", command="true", workingDir=str(tmp_path / "nope"))
    status = wait_final(backend, backend.start(request))
    assert status.phase == "Failed" and status.exit_code == 3
    assert f"working directory: {tmp_path / 'nope'} does not exist" in status.message
    assert {p.phase for p in status.pods} == {"Pending"}


def test_kill_9_of_the_supervisor_is_failed_and_leaves_no_orphans(
    backend, script, tmp_path
) -> None:
    request = make_request(tmp_path / "run", command=f"python {script(READY_THEN_WAIT)} ''")
    handle = backend.start(request)
    wait_lines(backend, handle, "ready", 3)
    pid = state(handle)["pid"]
    os.kill(pid, signal.SIGKILL)
    status = wait_until(
        lambda: (s := backend.poll(handle)).phase != "Running" and s, 10, "poll to notice"
    )
    assert status.phase == "Failed"
    assert status.message.startswith(f"the workload's supervisor died (pid {pid})")
    assert job_pids(f"rl-{request.workload_id}") == []
    assert backend.poll(handle).phase == "Failed"  # recorded, not re-discovered
    backend.cancel(handle)
    assert backend.poll(handle).phase == "Failed"


def test_a_new_backend_readopts_a_running_workload(script, tmp_path) -> None:
    go = tmp_path / "go"
    first = LocalBackend(grace_s=2.0)
    handle = first.start(
        make_request(tmp_path / "run", name="re", command=f"python {script(READY_THEN_WAIT)} {go}")
    )
    wait_lines(first, handle, "ready", 3)
    second = LocalBackend(grace_s=2.0)  # as after a server restart
    assert second.poll(handle).phase == "Running"
    with pytest.raises(Conflict):
        second.start(make_request(tmp_path / "run", name="re", command="true"))
    go.touch()
    status = wait_final(second, handle)
    assert status.phase == "Completed"
    assert [ln.pod for ln in second.logs(handle) if ln.text == "ready"] != []


SUBMIT_AND_HANG = """
import json, sys, time
from ringleader.server.backends.base import BackendRequest
from ringleader.server.backends.local import LocalBackend
from ringleader.spec import WorkloadSpec
args = json.loads(sys.argv[1])
request = BackendRequest(args["id"], "orphan", "team-a", WorkloadSpec.model_validate(args["spec"]), args["run_dir"])
print(LocalBackend().start(request), flush=True)
time.sleep(300)
"""


def test_supervisor_survives_its_parent_killed_with_9(backend, script, tmp_path) -> None:
    go = tmp_path / "go"
    command = f"python {script(READY_THEN_WAIT)} {go}"
    body = {"name": "orphan", "projectId": "team-a", "spec": {"numWorkers": 1, "command": command}}
    args = {"id": uuid.uuid4().hex[:10], "spec": body, "run_dir": str(tmp_path / "run")}
    parent = subprocess.Popen(
        [sys.executable, "-c", SUBMIT_AND_HANG, json.dumps(args)], stdout=subprocess.PIPE, text=True
    )
    handle = parent.stdout.readline().strip()
    assert handle == str(tmp_path / "run")
    wait_lines(backend, handle, "ready", 2)
    parent.kill()
    parent.wait()
    assert backend.poll(handle).phase == "Running"
    go.touch()
    status = wait_final(backend, handle)
    assert status.phase == "Completed", status.message
    assert job_pids(f"rl-{args['id']}") == []


MPI_HELLO = """
import os
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
print("rank", comm.Get_rank(), "of", comm.Get_size(), "sum", total, "workers", os.environ["RUNAI_MPI_NUM_WORKERS"])
"""


@pytest.mark.mpi
@pytest.mark.usefixtures("mpirun_available")
def test_mpi_workload_completes_with_launcher_and_worker_pods(backend, script, tmp_path) -> None:
    request = make_request(
        tmp_path / "run",
        name="dist",
        distributedFramework="MPI",
        slotsPerWorker=2,
        command=f"python {script(MPI_HELLO)}",
    )
    handle = backend.start(request)
    status = wait_final(backend, handle, timeout=120)
    assert status.phase == "Completed", state(handle).get("summary")
    assert pods(status) == {
        "dist-launcher": ("Succeeded", 0),
        "dist-worker-0": ("Succeeded", 0),
        "dist-worker-1": ("Succeeded", 0),
    }
    out = sorted((ln.pod, ln.text) for ln in backend.logs(handle) if ln.text.startswith("rank"))
    assert out == [
        ("dist-worker-0", "rank 0 of 4 sum 6 workers 2"),
        ("dist-worker-0", "rank 1 of 4 sum 6 workers 2"),
        ("dist-worker-1", "rank 2 of 4 sum 6 workers 2"),
        ("dist-worker-1", "rank 3 of 4 sum 6 workers 2"),
    ]
    assert job_pids(f"rl-{request.workload_id}") == []


MPI_FAIL = """
import os, sys, time
if os.environ["RANK"] == "3":
    time.sleep(0.3)
    sys.exit(5)
time.sleep(300)
"""


@pytest.mark.mpi
@pytest.mark.usefixtures("mpirun_available")
def test_mpi_failure_fails_the_workers_pod_and_the_launcher(backend, script, tmp_path) -> None:
    request = make_request(
        tmp_path / "run",
        name="dist",
        distributedFramework="MPI",
        slotsPerWorker=2,
        backoffLimit=0,
        command=f"python {script(MPI_FAIL)}",
    )
    handle = backend.start(request)
    status = wait_final(backend, handle, timeout=120)
    assert status.phase == "Failed" and status.exit_code == 5
    phases = {p.name: p.phase for p in status.pods}
    assert phases == {
        "dist-launcher": "Failed",
        "dist-worker-0": "Stopped",
        "dist-worker-1": "Failed",
    }
    assert job_pids(f"rl-{request.workload_id}") == []


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True
