"""The Slurm backend's tables and readings, pure: job state -> phase, pending reasons in
words, node states, ``scontrol show node`` text, a job and its supervisor's record as one
status, and a Slurm pool folded into one node for the scheduler."""

from __future__ import annotations

from typing import Any

from ringleader.server.backends.local.planning import LocalPod
from ringleader.server.backends.slurm.status import job_status
from ringleader.server.engine_pools import fold
from ringleader.server.models import Node
from ringleader.slurm.commands import JobInfo, JobState
from ringleader.slurm.nodes import gres_gpus, parse_nodes
from ringleader.slurm.states import JOB_PHASES, job_phase, node_ready

PODS = [LocalPod("m-master-0", "master", 0, (0,)), LocalPod("m-worker-0", "worker", 0, (1,))]


def test_every_slurm_job_state_has_one_phase() -> None:
    assert {s.value for s in JobState} - {"UNKNOWN"} <= set(JOB_PHASES)
    golden = {
        "PENDING": "Initializing", "CONFIGURING": "Initializing", "RUNNING": "Running",
        "COMPLETING": "Running", "COMPLETED": "Completed", "FAILED": "Failed",
        "CANCELLED": "Stopped", "TIMEOUT": "Failed", "NODE_FAIL": "Failed",
        "PREEMPTED": "Pending", "OUT_OF_MEMORY": "Failed", "BOOT_FAIL": "Failed",
        "DEADLINE": "Failed", "REQUEUED": "Pending", "REQUEUE_HOLD": "Pending",
        "RESIZING": "Running", "SUSPENDED": "Degraded", "SPECIAL_EXIT": "Failed",
    }  # fmt: skip
    assert {state: job_phase(state) for state in golden} == golden
    assert job_phase("CANCELLED by 0") == "Stopped"
    assert job_phase("WARP_DRIVE") == "Unknown"  # a state Slurm adds later
    # Restarts > 0: Slurm requeued it (ringleader submits each job once): taken back ...
    assert job_phase("PENDING", restarts=1) == "Pending"
    assert job_phase("RUNNING", restarts=1) == "Pending"
    # ... unless it ended meanwhile (a server that was down while it ran again).
    assert job_phase("COMPLETED", restarts=1) == "Completed"


def test_node_states_ready_or_not_with_slurms_reason() -> None:
    assert node_ready("IDLE") == (True, "")
    assert node_ready("MIXED")[0] and node_ready("ALLOCATED")[0]
    assert node_ready("IDLE+DRAIN", "disk full [root@2026-01-01]") == (
        False,
        "Slurm: drained (IDLE+DRAIN): disk full [root@2026-01-01]",
    )
    assert node_ready("DOWN*") == (False, "Slurm: down, not responding (DOWN*)")
    assert not node_ready("IDLE+NOT_RESPONDING")[0]


SCONTROL_NODES = (
    "NodeName=g1 Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 CPUTot=32 Gres=gpu:a100:2(S:0),"
    "gpu:a100:2(S:1) NodeAddr=10.1.0.1 NodeHostName=g1 OS=Linux 6.1 #1 SMP RealMemory=512000 "
    "State=MIXED Partitions=gpu,all Reason=None\n"
    "NodeName=c1 CPUTot=4 Gres=(null) NodeAddr=c1 RealMemory=4000 State=IDLE+DRAIN "
    "Partitions=debug Reason=disk full [root@2026-11-24T05:13:30]\n"
)


def test_scontrol_nodes_are_read_with_their_gpus_and_state() -> None:
    g1, c1 = parse_nodes(SCONTROL_NODES)
    assert (g1.name, g1.cpus, g1.memory_mb, g1.gpus, g1.gpu_model) == ("g1", 32, 512000, 4, "a100")
    assert g1.partitions == ("gpu", "all") and g1.address == "10.1.0.1" and g1.ready
    assert (c1.gpus, c1.ready, c1.reason) == (0, False, "disk full [root@2026-11-24T05:13:30]")
    assert "drained" in c1.message
    assert gres_gpus("gpu:4,mps:100") == (4, "")


def job(state: str, reason: str | None = None, restarts: int = 0, **extra: Any) -> JobInfo:
    nodes = extra.pop("nodes", ["rl1", "rl2"] if state != "PENDING" else [])
    return JobInfo("42", JobState.parse(state), reason, extra.get("exit_code"), nodes,
                   "rl[1-2]", None, None, None, restarts)  # fmt: skip


def state(phase: str, codes: dict[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    ranks = {r: {"phase": "Running", "exit_code": None} for r in ("0", "1")}
    for rank, code in (codes or {}).items():
        ranks[rank] = {"phase": "Succeeded" if code == 0 else "Failed", "exit_code": code}
    return {"phase": phase, "attempt": 0, "ranks": ranks, "updated_at": 1.0, **extra}


def test_a_pending_job_says_slurms_reason_in_words() -> None:
    status = job_status("42", job("PENDING", "Resources"), None, PODS)
    assert (status.phase, status.reason) == ("Initializing", "Resources")
    assert "Slurm job 42 is PENDING: Resources: the nodes it asks for are busy" in status.message
    assert {p.phase for p in status.pods} == {"Pending"}
    config = job_status("42", job("PENDING", "PartitionConfig"), None, PODS).message
    assert "PartitionConfig: it asks for more than its partition's configuration allows" in config
    odd = job_status("42", job("PENDING", "SomethingNew"), None, PODS)
    assert "SomethingNew" in odd.message  # never dropped


def test_a_running_job_is_its_supervisors_record_on_slurms_nodes() -> None:
    starting = job_status("42", job("RUNNING"), None, PODS)
    assert starting.phase == "Initializing" and "started on rl1, rl2" in starting.message
    running = job_status("42", job("RUNNING"), state("Running"), PODS)
    assert running.phase == "Running"
    assert [(p.name, p.node, p.phase) for p in running.pods] == [
        ("m-master-0", "rl1", "Running"),
        ("m-worker-0", "rl2", "Running"),
    ]
    stopped = state("Stopped", reason="stopped by SIGTERM")
    ending = job_status("42", job("COMPLETING"), stopped, PODS)
    assert ending.phase == "Running"  # Slurm's word on why comes when the job has ended


def test_an_ended_job_says_why_from_both_records() -> None:
    failed = state("Failed", {"1": 1}, exit_code=1, reason="rank 1 on rl2: exit code 1")
    status = job_status("42", job("FAILED", exit_code=1), failed, PODS)
    assert (status.phase, status.exit_code) == ("Failed", 1)
    assert status.message.startswith("rank 1 on rl2: exit code 1")
    stopped = state("Stopped", reason="stopped by SIGTERM")
    cancelled = job_status("42", job("CANCELLED"), stopped, PODS)
    assert cancelled.phase == "Stopped"
    assert cancelled.message == "Slurm job 42 was cancelled (scancel); stopped by SIGTERM"
    killed = job_status("42", job("TIMEOUT", exit_code=143), None, PODS, log_tail="last words")
    assert killed.phase == "Failed" and "reached its time limit" in killed.message
    assert killed.message.endswith("last words")
    forgotten = job_status("42", None, state("Succeeded", {"0": 0, "1": 0}, exit_code=0), PODS)
    assert forgotten.phase == "Completed"  # Slurm forgot it (MinJobAge): the record tells
    assert job_status("42", None, None, PODS).phase == "Failed"


def test_a_requeued_or_preempted_job_is_taken_back() -> None:
    for record in (job("PENDING", "BeginTime", restarts=1), job("PREEMPTED")):
        status = job_status("42", record, None, PODS)
        assert (status.phase, status.reason) == ("Pending", "Preempted")
        assert "resubmitted from its last checkpoint" in status.message


def row(name: str, kind: str = "slurm", pool: str = "default", **extra: Any) -> Node:
    values = {"cpu_cores": 4.0, "memory_bytes": 4000, "gpus": [], "ready": True, "address": ""}
    return Node(name=name, kind=kind, pool=pool, labels={}, message="", **{**values, **extra})


def test_a_slurm_pool_is_one_node_to_the_scheduler() -> None:
    gpus = [{"index": 0, "memoryBytes": 0}, {"index": 1, "memoryBytes": 0}]
    rows = [row("rl1", gpus=gpus), row("rl2", gpus=gpus), row("rl3", ready=False),
            row("sim-0", kind="simulated")]  # fmt: skip
    nodes, alias = fold(rows)
    assert sorted(nodes) == ["sim-0", "slurm:default"]
    pool = nodes["slurm:default"]
    assert (pool.cpu_cores, pool.memory_bytes, pool.ready) == (8.0, 8000, True)  # Ready ones
    assert [g["index"] for g in pool.gpus] == [0, 1, 2, 3]
    assert alias["rl1"] is pool and alias["rl3"] is pool
