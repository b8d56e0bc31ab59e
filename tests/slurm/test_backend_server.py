"""The server's Slurm backend end to end: a real ``ringleader server --backend slurm:debug``
process on the throw-away cluster (rl1..rl3, ``tests/fixtures/slurmcluster.py``), driven
through the CLI as a user would.  Several behaviours per workload (each costs seconds);
no test asserts a duration."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import job_pids, wait_until
from tests.fixtures.images import python_image
from tests.fixtures.slurmcluster import SlurmCluster
from tests.helpers import phases as phases_helper
from tests.helpers.phases import actual_phase, stayed
from tests.server.conftest import ServerProcess, stop_workloads

__all__ = ["python_image"]  # the fixture, used by name
TIMEOUT_S = 180


@contextlib.contextmanager
def slurm_server(home: Path, slurm: SlurmCluster) -> Iterator[ServerProcess]:
    """``ringleader server --backend slurm:debug`` on ``home``, reaching the cluster."""
    proc = ServerProcess(home, "--backend", f"slurm:{slurm.partition}")
    proc.env["SLURM_CONF"] = str(slurm.conf)
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
        stop_workloads(home)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def describe(server: ServerProcess, name: str) -> dict[str, Any]:
    return json.loads(ok(server.cli("describe", name, "-o", "json")))


def described(server: ServerProcess, name: str) -> dict[str, Any] | None:
    out = server.cli("describe", name, "-o", "json")
    return json.loads(out.stdout) if out.returncode == 0 else None


def slurm_said(server: ServerProcess, workload: dict[str, Any] | None) -> str:
    """Where a workload stayed, with its pods and Slurm's own record of its job: what a
    failure under CI's load needs to be explained after the cluster is gone."""
    said = stayed(workload)
    if not workload:
        return said
    pods = [(p.get("name"), p.get("status"), p.get("exitCode")) for p in workload.get("pods", [])]
    said += f"\npods: {pods}\nbackend: {workload.get('backendRef')}"
    match = re.fullmatch(r"Slurm job (\d+)", workload.get("backendRef") or "")
    if match:
        shown = subprocess.run(
            ["scontrol", "show", "job", match.group(1)],
            env=server.env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        said += f"\nscontrol show job: {shown.stdout}{shown.stderr}"
    for state in sorted((server.home / "runs").glob("*/state.json")):
        said += f"\n{state}: {state.read_text(errors='replace')}"
    log = server.home / "server-test.log"
    if log.exists():
        said += "\nserver log (end):\n" + "\n".join(
            log.read_text(errors="replace").splitlines()[-40:]
        )
    return said


def wait_phase(server: ServerProcess, name: str, *phases: str) -> dict[str, Any]:
    found = phases_helper.wait_phase(
        lambda: described(server, name),
        actual_phase,
        phases,
        TIMEOUT_S,
        lambda last: slurm_said(server, last),
        every_s=0.5,
    )
    assert found is not None
    return found


def job_id(workload: dict[str, Any]) -> str:
    match = re.fullmatch(r"Slurm job (\d+)", workload["backendRef"])
    assert match and workload["backend"] == "slurm", workload["backendRef"]
    return match.group(1)


def logs(server: ServerProcess, name: str) -> str:
    return ok(server.cli("logs", name))


def test_digits_on_two_nodes_with_merged_logs_and_a_server_killed_meanwhile(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    with slurm_server(tmp_path / "home", slurm) as server:
        listed = ok(server.cli("nodes", "list"))
        for node in slurm.nodes:  # the partition's nodes, from Slurm
            assert re.search(rf"^\s*{node}\s+slurm\s+default\s+Ready\s", listed, re.M), listed
        ok(server.cli("submit-dist", "pytorch", "dig", "--workers", "1", "--",
                      "python", "-m", "ringleader.examples.digits", "--epochs", "3"))  # fmt: skip
        running = wait_phase(server, "dig", "Running", "Completed")
        job = job_id(running)
        assert running["workloadId"] in slurm.job_field(job, "Comment")
        assert f"Backend: slurm   Slurm job {job}" in ok(server.cli("describe", "dig"))
        server.kill()  # kill -9: the job runs on; the next server adopts it by its handle
        server.start()
        done = wait_phase(server, "dig", "Completed", "Failed")
        assert done["actualPhase"] == "Completed", done["phaseMessage"]
        pods = {p["name"]: p for p in done["pods"]}
        assert {p["status"] for p in pods.values()} == {"Succeeded"}
        nodes = {p["node"] for p in pods.values()}
        assert len(nodes) == 2 and nodes <= set(slurm.nodes)  # one pod per Slurm node
        out = logs(server, "dig")
        assert re.search(r"^\[dig-master-0\] epoch 3/3", out, re.M), out
        assert re.search(r"^\[dig-master-0\] final test accuracy: 0\.\d+", out, re.M), out
        assert slurm.job_field(job, "JobState") == "COMPLETED"


# Rank 1 fails only once rank 0 has printed (its marker file is there): otherwise the
# fail-fast may end rank 0 before its first line, and the merged stream has one pod only.
FAILING = """\
import os, pathlib, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} of {os.environ['WORLD_SIZE']} on {os.environ['NODE_NAME']}", flush=True)
marker = pathlib.Path(__file__).with_name("rank-0-printed")
if rank == 0:
    marker.touch()
else:
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    sys.exit("rank 1: the data shard is missing")
time.sleep(300)
"""
SLEEPER = "import time; print('started', flush=True); time.sleep(300)"


def test_a_failing_rank_fails_it_with_the_root_cause_and_scancel_from_outside_ends_it(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    with slurm_server(tmp_path / "home", slurm) as server:
        ok(server.cli("submit-dist", "pytorch", "bad", "--workers", "1", "--backoff-limit", "0",
                      "--", "python", str(script)))  # fmt: skip
        failed = wait_phase(server, "bad", "Failed", "Completed")
        assert failed["actualPhase"] == "Failed"
        assert "rank 1" in failed["phaseMessage"]
        assert "the data shard is missing" in failed["phaseMessage"]  # the root cause
        pods = {p["name"]: p for p in failed["pods"]}
        assert (pods["bad-worker-0"]["status"], pods["bad-worker-0"]["exitCode"]) == ("Failed", 1)
        out = logs(server, "bad")  # both pods, from both nodes, in one stream
        assert re.search(r"^\[bad-master-0\] rank 0 of 2 on rl\d", out, re.M), out
        assert re.search(r"^\[bad-worker-0\] rank 1 of 2 on rl\d", out, re.M), out
        run_id = f"rl-{failed['workloadId']}"
        wait_until(lambda: not job_pids(run_id), 60, "no rank of the failed job left")

        ok(server.cli("submit-dist", "pytorch", "outside", "--workers", "1", "--",
                      sys.executable, "-c", SLEEPER))  # fmt: skip
        wait_until(lambda: logs(server, "outside").count("started") == 2, TIMEOUT_S, "started")
        job = job_id(describe(server, "outside"))
        slurm.run("scancel", job)
        ended = wait_phase(server, "outside", "Failed", "Completed", "Stopped")
        assert ended["actualPhase"] == "Failed" and ended["phaseReason"] == "StoppedOutside"
        assert f"Slurm job {job} was cancelled (scancel)" in ended["phaseMessage"]
        run_id = f"rl-{ended['workloadId']}"
        wait_until(lambda: not job_pids(run_id), 60, "no rank of the cancelled job left")


TRAINER = """\
import os, sys, time
from pathlib import Path
from ringleader import runtime
saved = runtime.load_checkpoint()
step = saved["step"] if saved else 0
rank = int(os.environ["RANK"])
if rank == 0:
    print(f"start at step {step}", flush=True)
while not Path(sys.argv[1]).exists():
    step += 1
    runtime.save_checkpoint({"step": step})
    if rank == 0:
        print(f"step {step}", flush=True)
    time.sleep(0.3)
"""


def starts(server: ServerProcess, name: str) -> list[int]:
    return [int(s) for s in re.findall(r"start at step (\d+)", logs(server, name))]


def steps_after(server: ServerProcess, name: str, count: int) -> bool:
    """A step line after the ``count``-th start line (the run since then has stepped)."""
    lines = logs(server, name).splitlines()
    begun = [i for i, line in enumerate(lines) if "start at step" in line]
    return len(begun) >= count and any("] step " in line for line in lines[begun[count - 1] :])


def test_suspend_resume_and_a_slurm_requeue_go_on_from_the_checkpoint(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    script, gate = tmp_path / "trainer.py", tmp_path / "gate"
    script.write_text(TRAINER)
    with slurm_server(tmp_path / "home", slurm) as server:
        ok(server.cli("submit-dist", "pytorch", "ckpt", "--workers", "1", "--",
                      "python", str(script), str(gate)))  # fmt: skip
        wait_until(lambda: steps_after(server, "ckpt", 1), TIMEOUT_S, "a first step")
        first = job_id(describe(server, "ckpt"))
        ok(server.cli("suspend", "ckpt"))
        wait_phase(server, "ckpt", "Stopped")
        assert slurm.job_field(first, "JobState") in ("CANCELLED", "FAILED", "COMPLETED")
        ok(server.cli("resume", "ckpt"))  # a new job, from the last checkpoint
        wait_until(lambda: steps_after(server, "ckpt", 2), TIMEOUT_S, "steps after resuming")
        second = job_id(describe(server, "ckpt"))
        assert second != first and starts(server, "ckpt")[1] > 0

        slurm.run("scontrol", "requeue", second)  # as a Slurm preemption does
        wait_until(lambda: steps_after(server, "ckpt", 3), TIMEOUT_S, "steps after the requeue")
        gate.write_text("done")
        done = wait_phase(server, "ckpt", "Completed", "Failed")
        assert done["actualPhase"] == "Completed", done["phaseMessage"]
        assert job_id(done) not in (first, second)
        assert slurm.job_field(second, "JobState") == "CANCELLED"  # not left to rerun itself
        first_start, resumed, requeued = starts(server, "ckpt")
        assert first_start == 0 and requeued > resumed > 0
        assert any(
            (e["fromPhase"], e["toPhase"], e["reason"]) == ("Running", "Pending", "Preempted")
            and f"Slurm job {second} was requeued by Slurm" in e["message"]
            for e in done["events"]
        ), done["events"]


def test_a_job_that_cannot_fit_waits_with_slurms_reason_and_bad_input_is_refused(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "ringleader",
            "server",
            "--run-as",
            "server",
            "--backend",
            "slurm:nope",
        ],
        env={**slurm.env, "RINGLEADER_HOME": str(tmp_path / "refused")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "--backend" in bad.stderr and "no partition 'nope'" in bad.stderr
    with slurm_server(tmp_path / "home", slurm) as server:
        for flags, words in (
            (["--workers", "3"], r"--workers: 4 pods need 4 nodes"),
            (
                ["--workers", "1", "-g", "1"],
                r"(-g|--gpu\S*|gpuDevicesRequest).*: each pod asks for 1 GPUs, but partition debug has no GPUs",
            ),
        ):
            refused = server.cli("submit-dist", "pytorch", "huge", *flags, "--", "true")
            assert refused.returncode != 0 and re.search(words, refused.stderr), refused.stderr
        assert "huge" not in ok(server.cli("list"))  # nothing half-created

        hog = slurm.run("sbatch", "--parsable", "-N3", "--exclusive", "-o", "/dev/null",
                        "--wrap", "sleep 300").strip()  # fmt: skip
        wait_until(lambda: slurm.job_field(hog, "JobState") == "RUNNING", 60, "the hog runs")
        ok(server.cli("submit-dist", "pytorch", "waits", "--workers", "1", "--",
                      sys.executable, "-c", "print('ran at last')"))  # fmt: skip
        wait_until(
            lambda: describe(server, "waits")["phaseReason"] == "Resources", TIMEOUT_S, "Resources"
        )
        waiting = describe(server, "waits")
        assert waiting["actualPhase"] == "Initializing"
        assert {p["status"] for p in waiting["pods"]} == {"Pending"}
        text = ok(server.cli("describe", "waits"))
        assert "Status: Initializing (Resources)" in text
        assert "Resources: the nodes it asks for are busy" in text
        slurm.run("scancel", hog)
        done = wait_phase(server, "waits", "Completed", "Failed")
        assert done["actualPhase"] == "Completed", done["phaseMessage"]
        assert logs(server, "waits").count("ran at last") == 2


def test_an_image_workload_runs_in_its_image_in_the_job_steps(
    slurm: SlurmCluster, python_image: str, tmp_path: Path
) -> None:
    """Where the cluster's nodes have podman, each job step's agent runs its ranks as
    ``podman run`` of the workload's image (issue 24, item 6), and removes them."""
    from tests.fixtures.images import job_containers

    script = 'echo "rank $RANK on $RINGLEADER_NODE in $(. /etc/os-release; echo $PRETTY_NAME)"'
    with slurm_server(tmp_path / "home", slurm) as server:
        ok(server.cli("submit-dist", "pytorch", "img", "--workers", "1", "-i", python_image,
                      "--command", "--", "sh", "-c", script, cwd=str(tmp_path)))  # fmt: skip
        done = wait_phase(server, "img", "Completed", "Failed")
        assert done["actualPhase"] == "Completed", done
        out = logs(server, "img")
        for pod, rank in (("img-master-0", 0), ("img-worker-0", 1)):
            line = rf"^\[{pod}\] rank {rank} on rl\d in Debian GNU/Linux 12 \(bookworm\)$"
            assert re.search(line, out, re.M), out
        assert job_containers(f"rl-{done['workloadId']}") == []
