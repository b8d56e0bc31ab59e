"""Cgroups: the v2 code against a fake cgroupfs tree, the v1 code against this kernel,
and the local backend's runs that nothing escapes (a new session, a dropped marker)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.launch.detached import write_json_atomic
from ringleader.server.backends.base import BackendRequest
from ringleader.server.backends.local import LocalBackend
from ringleader.server.backends.local.cgroup_versions import CgroupV1, CgroupV2, detect, own_cgroups
from ringleader.server.backends.local.cgroups import JOIN_VAR, Limits, Usage, join_argv
from tests.conftest import require, wait_until
from tests.helpers.cgroups import (
    BURN_MB,
    cgroup_dirs,
    completed_after_a_daemon,
    describe_pods,
    escaping_command,
    pod_rows,
    processes_with_arg,
    unique_seconds,
)
from tests.helpers.local_backend import make_request, wait_final, wait_lines

# ----- the v2 code against a fake tree -------------------------------------------


class FakeV2(CgroupV2):
    """Real cgroupfs removes a directory with its interface files; a tmp dir needs rmtree."""

    def rmdir(self, path: Path) -> None:
        shutil.rmtree(path)


def fake_v2_root(tmp_path: Path) -> Path:
    root = tmp_path / "cgroupfs"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def test_v2_is_detected_by_its_unified_root_and_parents_under_it(tmp_path) -> None:
    root = fake_v2_root(tmp_path)
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text("0::/\n")
    found = detect(root, self_cgroup)
    assert isinstance(found, CgroupV2) and found.isolation == "cgroup-v2"
    assert found.parents == {"unified": root / "ringleader"}
    assert (root / "ringleader").is_dir()
    # The root's controllers reach ringleader's cgroup (a cgroup with processes cannot
    # enable them for its children; the root may).
    assert (root / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"


def test_v2_run_and_pod_cgroups_get_controllers_limits_and_joins(tmp_path) -> None:
    root = fake_v2_root(tmp_path)
    v2 = FakeV2({"unified": root / "ringleader"})
    (root / "ringleader").mkdir()
    (root / "ringleader" / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "ringleader" / "cgroup.subtree_control").write_text("")
    (root / "ringleader" / "rl-w1").mkdir()
    (root / "ringleader" / "rl-w1" / "cgroup.controllers").write_text("cpu memory pids\n")
    pod = root / "ringleader" / "rl-w1" / "job-master-0"
    pod.mkdir()  # the files the kernel makes with the memory and cpu controllers
    for name in ("memory.max", "memory.swap.max", "memory.low", "cpu.max", "cpu.weight"):
        (pod / name).write_text("max\n")
    limits = Limits(256 << 20, 1.5, memory_request_bytes=100 << 20, cpu_request_cores=0.5)
    v2.create("rl-w1/job-master-0", limits)
    assert (pod / "memory.max").read_text() == str(256 << 20)
    assert (pod / "memory.swap.max").read_text() == "0"
    assert (pod / "cpu.max").read_text() == "150000 100000"
    assert (pod / "memory.low").read_text() == str(100 << 20)
    assert (pod / "cpu.weight").read_text() == "50"
    assert (root / "ringleader" / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    assert (root / "ringleader" / "rl-w1" / "cgroup.subtree_control").read_text() == (
        "+memory +cpu +pids"
    )
    assert v2.procs_files("rl-w1/job-master-0") == [str(pod / "cgroup.procs")]
    assert v2.runs() == ["rl-w1"]


def test_v2_without_controllers_below_the_root_tracks_but_does_not_limit(tmp_path) -> None:
    v2 = FakeV2({"unified": tmp_path / "ringleader"})
    v2.create("rl-w1/p", Limits(memory_bytes=1 << 30, cpu_cores=1.0))  # no error
    assert sorted(os.listdir(tmp_path / "ringleader" / "rl-w1" / "p")) == []
    assert v2.usage("rl-w1/p") == Usage(None, None, 0)


def test_v2_usage_reads_memory_peak_cpu_stat_and_oom_kills(tmp_path) -> None:
    v2 = FakeV2({"unified": tmp_path})
    pod = tmp_path / "rl-w1" / "p"
    pod.mkdir(parents=True)
    assert v2.usage("rl-w1/p") == Usage(None, None, 0)  # a kernel without memory.peak
    (pod / "memory.peak").write_text("123456789\n")
    (pod / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    (pod / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert v2.usage("rl-w1/p") == Usage(123456789, 2.5, 1)


def test_v2_kill_uses_cgroup_kill_and_else_freezes(tmp_path) -> None:
    v2 = FakeV2({"unified": tmp_path})
    run = tmp_path / "rl-w1"
    (run / "p").mkdir(parents=True)
    (run / "cgroup.kill").write_text("")
    assert v2.kill("rl-w1")
    assert (run / "cgroup.kill").read_text() == "1"
    (run / "cgroup.kill").unlink()  # a kernel before 5.14: freeze, SIGKILL each, thaw
    (run / "cgroup.events").write_text("populated 0\nfrozen 1\n")
    assert v2.kill("rl-w1")
    assert (run / "cgroup.freeze").read_text() == "0"
    v2.remove("rl-w1")
    assert not run.exists() and v2.kill("rl-w1")  # a gone cgroup is no error


def test_v2_pids_are_read_from_the_whole_subtree(tmp_path) -> None:
    v2 = FakeV2({"unified": tmp_path})
    (tmp_path / "rl-w1" / "a").mkdir(parents=True)
    (tmp_path / "rl-w1" / "cgroup.procs").write_text("")
    (tmp_path / "rl-w1" / "a" / "cgroup.procs").write_text("11\n12\n")
    assert v2.pids("rl-w1") == {11, 12}


def test_no_cgroupfs_means_no_hierarchy(tmp_path) -> None:
    assert detect(tmp_path, tmp_path / "none") is None


def test_own_cgroups_reads_v1_and_v2_lines() -> None:
    text = "4:memory:/box/1\n2:cpu,cpuacct:/\n0::/user.slice\n"
    assert own_cgroups(text) == {"memory": "/box/1", "cpu": "/", "cpuacct": "/", "": "/user.slice"}


def test_the_join_shim_writes_its_pid_everywhere_then_execs(tmp_path) -> None:
    files = [tmp_path / "a.procs", tmp_path / "b.procs"]
    out = subprocess.run(
        join_argv(
            [sys.executable, "-c", f"import os; print(os.getpid(), '{JOIN_VAR}' in os.environ)"]
        ),
        env={"PATH": os.environ["PATH"], JOIN_VAR: " ".join(map(str, files))},
        capture_output=True,
        text=True,
        check=True,
    )
    pid, leaked = out.stdout.split()
    assert [f.read_text().strip() for f in files] == [pid, pid] and leaked == "False"


def test_the_join_shim_runs_nothing_when_it_cannot_join(tmp_path) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        join_argv(["touch", str(marker)]),
        env={"PATH": os.environ["PATH"], JOIN_VAR: str(tmp_path / "no" / "cgroup.procs")},
        capture_output=True,
    )
    assert done.returncode == 126 and not marker.exists()


# ----- the real kernel (v1 here) -------------------------------------------------


@pytest.fixture
def hierarchy():
    found = detect()
    require(found is not None, "a writable cgroupfs (root)")
    return found


@pytest.fixture
def backend(hierarchy) -> LocalBackend:
    return LocalBackend(grace_s=1.0, cgroups=hierarchy)


@pytest.fixture(autouse=True)
def no_run_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a test started ends with it, even when it fails half-way (its run dirs
    go with pytest's old tmp dirs, and a cgroup with processes is nobody's to clean)."""
    yield
    for launch in tmp_path.rglob("launch.json"):  # a server's runs (home/runs/ID) too
        LocalBackend(grace_s=1.0).cancel(str(launch.parent))


def test_this_host_has_a_cgroup_hierarchy(hierarchy) -> None:
    real = Path("/sys/fs/cgroup")
    expected = "cgroup-v2" if (real / "cgroup.controllers").exists() else "cgroup-v1"
    assert hierarchy.isolation == expected


def test_delete_ends_processes_that_left_the_session_and_dropped_the_marker(
    backend, hierarchy, tmp_path
) -> None:
    seconds = unique_seconds()
    request = make_request(tmp_path / "run", workers=1, command=escaping_command(seconds, "wait"))
    handle = backend.start(request)
    run_id = f"rl-{request.workload_id}"
    wait_lines(backend, handle, "daemons up", 2)
    wait_until(lambda: len(processes_with_arg(seconds)) == 4, 30, "4 daemons")
    assert {p.isolation for p in backend.poll(handle).pods} == {hierarchy.isolation}
    backend.cancel(handle)
    assert processes_with_arg(seconds) == []
    assert cgroup_dirs(hierarchy, run_id) == []
    assert backend.poll(handle).phase == "Stopped"


def test_completion_ends_a_daemon_the_command_left_and_records_usage(
    backend, hierarchy, tmp_path
) -> None:
    status, handle = completed_after_a_daemon(backend, hierarchy, tmp_path)
    for pod in status.pods:  # a master and a worker, each in a cgroup of its own
        assert pod.isolation == hierarchy.isolation
        assert pod.peak_memory_bytes is not None and pod.peak_memory_bytes >= BURN_MB << 20
        assert pod.cpu_seconds is not None and pod.cpu_seconds > 0
    assert backend.poll(handle).pods == status.pods  # kept after the cgroup


def test_a_rank_over_its_memory_limit_is_killed_and_the_workload_says_why(
    backend, hierarchy, tmp_path
) -> None:
    hog = (  # the master only: the worker is stopped with the gang, not by the kernel
        "python3 -c \"import os, time; b = os.environ['RANK'] == '0' and bytearray(400 << 20);"
        ' time.sleep(60)"'
    )
    request = make_request(
        tmp_path / "run",
        workers=1,
        command=hog,
        backoffLimit=0,
        compute={"cpuMemoryLimit": "64Mi", "cpuCoreLimit": 0.5},
    )
    handle = backend.start(request)
    status = wait_final(backend, handle)
    assert status.phase == "Failed"
    assert "out of memory" in status.message and "pod(s) job-master-0 " in status.message
    assert [p.phase for p in status.pods] == ["Failed", "Stopped"]
    for pod in status.pods:
        assert pod.peak_memory_bytes is not None and pod.peak_memory_bytes <= 64 << 20
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}") == []


def test_a_pods_cgroup_enforces_its_limits_and_shares_its_requests(
    backend, hierarchy, tmp_path
) -> None:
    compute = {"cpuMemoryLimit": "100Mi", "cpuCoreLimit": 0.25}
    requests = {"cpuMemoryRequest": "50Mi", "cpuCoreRequest": 0.5}
    request = make_request(
        tmp_path / "run", workers=1, command="sleep 60", compute=compute | requests
    )
    handle = backend.start(request)
    try:
        pod = f"rl-{request.workload_id}/job-worker-0"
        if isinstance(hierarchy, CgroupV1):
            memory = hierarchy.parents["memory"] / pod / "memory.limit_in_bytes"
            cpu = hierarchy.parents["cpu"] / pod
            assert int(memory.read_text()) == 100 << 20
            period = int((cpu / "cpu.cfs_period_us").read_text())
            assert int((cpu / "cpu.cfs_quota_us").read_text()) == period // 4
            assert int((cpu / "cpu.shares").read_text()) == 512
            soft = hierarchy.parents["memory"] / pod / "memory.soft_limit_in_bytes"
            assert int(soft.read_text()) == 50 << 20
        else:
            top = hierarchy.parents["unified"] / pod
            assert (top / "memory.max").read_text().strip() == str(100 << 20)
            assert (top / "cpu.max").read_text().split() == ["25000", "100000"]
            assert (top / "cpu.weight").read_text().strip() == "50"
        wait_until(lambda: len(hierarchy.pids(pod)) == 1, 30, "the worker in its cgroup")
    finally:
        backend.cancel(handle)
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}") == []


@pytest.mark.usefixtures("mpirun_available")
def test_mpi_ranks_join_their_worker_pods_cgroups_and_mpirun_stays_with_the_supervisor(
    backend, hierarchy, tmp_path
) -> None:
    request = make_request(
        tmp_path / "run",
        workers=2,
        command="sh -c 'grep freezer: /proc/self/cgroup || cat /proc/self/cgroup'",
        distributedFramework="MPI",
    )
    handle = backend.start(request)
    status = wait_final(backend, handle)
    assert status.phase == "Completed", status.message
    run_id = f"rl-{request.workload_id}"
    seen = {(ln.pod, ln.text.rsplit(":", 1)[-1]) for ln in backend.logs(handle)}
    assert seen == {(f"job-worker-{i}", f"/ringleader/{run_id}/job-worker-{i}") for i in (0, 1)}
    pods = {p.name: p for p in status.pods}
    assert pods["job-launcher"].peak_memory_bytes is None  # mpirun's pod: not measured
    assert pods["job-worker-1"].peak_memory_bytes
    assert cgroup_dirs(hierarchy, run_id) == []


def test_a_new_backend_ends_what_an_old_one_started_and_cleans_stale_cgroups(
    hierarchy, tmp_path
) -> None:
    seconds = unique_seconds()
    first = LocalBackend(grace_s=1.0, cgroups=hierarchy)
    runs = tmp_path / "runs"  # a server's: each run dir named by its workload's id
    request = in_runs(runs, workers=1, command=escaping_command(seconds, "wait"))
    handle = first.start(request)
    ended = in_runs(runs, workers=1, command="python3 -c 'sum(range(10**6))'")
    quick = first.start(ended)
    wait_until(lambda: len(processes_with_arg(seconds)) == 4, 30, "4 daemons")
    wait_until(lambda: state_of(quick).get("phase") == "Succeeded", 30, "the quick run's end")
    wait_until(lambda: not hierarchy.pids(f"rl-{ended.workload_id}"), 30, "its supervisor gone")
    # As a server killed before its spawn leaves it: launch.json and the cgroups, no process.
    never = in_runs(runs, workers=1, command="true")
    stale = f"rl-{never.workload_id}"
    Path(never.run_dir).mkdir(parents=True)
    write_json_atomic(
        Path(never.run_dir) / "launch.json", first.plan(never).launch_file().to_json()
    )
    hierarchy.create(f"{stale}/supervisor")
    foreign = f"rl-other-{uuid.uuid4().hex[:8]}"  # another server's: not this one's to clean
    hierarchy.create(f"{foreign}/supervisor")
    del first  # the server dies, unpolled (its supervisors live on, detached)
    second = LocalBackend(grace_s=1.0, cgroups=hierarchy)
    assert second.poll(handle).phase == "Running"  # its first poll cleans, once
    assert cgroup_dirs(hierarchy, stale) == []
    assert cgroup_dirs(hierarchy, foreign)
    hierarchy.remove(foreign)
    assert cgroup_dirs(hierarchy, f"rl-{ended.workload_id}") == []
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}")  # a live run's is kept
    done = second.poll(quick)  # ended while no server ran: its measures were kept
    assert done.phase == "Completed" and all(p.cpu_seconds for p in done.pods)
    second.cancel(handle)
    assert processes_with_arg(seconds) == []
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}") == []


def in_runs(runs: Path, **spec) -> BackendRequest:
    """A request whose run dir is named by its workload's id, as the server's are."""
    request = make_request(runs / "x", **spec)
    return dataclasses.replace(request, run_dir=str(runs / request.workload_id))


def state_of(handle: str) -> dict:
    import json

    try:
        return json.loads((Path(handle) / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def test_without_cgroups_the_environment_marker_is_the_fallback(tmp_path) -> None:
    backend = LocalBackend(grace_s=1.0, cgroups=None)
    request = make_request(tmp_path / "run", workers=1, command="true")
    handle = backend.start(request)
    status = wait_final(backend, handle)
    assert status.phase == "Completed"
    assert {(p.isolation, p.peak_memory_bytes) for p in status.pods} == {("environment", None)}


# ----- through a real server: describe, and a server killed with -9 ----------------


def test_describe_shows_each_pods_peak_memory_cpu_time_and_isolation(hierarchy, tmp_path) -> None:
    from tests.server.conftest import ServerProcess, stop_workloads

    server = ServerProcess(tmp_path / "home")
    server.start()
    try:
        burn = "b = bytearray(40 << 20); sum(range(3_000_000))"
        sub = server.cli("submit-dist", "pytorch", "meter", "--workers", "1", "--",
                         "python3", "-c", burn)  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        wait_until(lambda: "Status: Completed" in describe_pods(server, "meter"), 90, "Completed")
        # The final figures are written with the pods' last phase change.
        described = wait_until(
            lambda: (d := describe_pods(server, "meter")) and "-  -" not in d and d, 30, "usage"
        )
        assert "PEAK MEMORY" in described and "CPU TIME" in described, described
        rows = pod_rows(str(described), "meter")
        assert len(rows) == 2, described
        for row in rows:  # ... RANKS, PEAK MEMORY, CPU TIME, ISOLATION
            assert row[-1] == hierarchy.isolation, described
            assert row[-2].endswith("s") and float(row[-2][:-1]) > 0, described
            assert row[-3].endswith("MiB") and float(row[-3][:-3]) >= 40, described
        pods = server.cli("get", "meter").stdout
        assert pods  # the same rows serve the API; the CLI reads them back
    finally:
        server.kill()
        stop_workloads(server.home)


def test_a_server_killed_with_9_then_restarted_leaves_no_process_or_cgroup(
    hierarchy, tmp_path
) -> None:
    from tests.server.conftest import ServerProcess, stop_workloads

    seconds = unique_seconds()
    server = ServerProcess(tmp_path / "home")
    server.start()
    try:
        script = tmp_path / "escape.sh"
        script.write_text(
            f"env -u RINGLEADER_JOB_ID setsid sleep {seconds} &\n"
            f"env -i setsid sleep {seconds} &\necho daemons up\nwait\n"
        )
        sub = server.cli(
            "submit-dist", "pytorch", "escaper", "--workers", "1", "--", "sh", str(script)
        )
        assert sub.returncode == 0, sub.stderr
        wait_until(lambda: len(processes_with_arg(seconds)) == 4, 60, "4 daemons")
        (run,) = [p.name for p in (server.home / "runs").iterdir()]
        server.kill()  # -9: the run and its cgroup live on, detached
        assert cgroup_dirs(hierarchy, f"rl-{run}")
        server.start()
        wait_until(lambda: "Status: Running" in describe_pods(server, "escaper"), 60, "re-adopted")
        assert server.cli("delete", "escaper").returncode == 0
        wait_until(lambda: server.cli("describe", "escaper").returncode != 0, 60, "deleted")
        wait_until(lambda: not processes_with_arg(seconds), 30, "no daemon left")
        assert cgroup_dirs(hierarchy, f"rl-{run}") == []
    finally:
        server.kill()
        stop_workloads(server.home)


# ----- the reconciler: measures written with changes, and once final -------------


def test_a_poll_writes_measures_only_with_a_change_or_when_the_pod_has_ended() -> None:
    from ringleader.server.backends.base import BackendStatus, PodStatus
    from ringleader.server.background.status_diff import record_usage, status_diff
    from ringleader.server.models import Pod, Workload

    pod = Pod(name="w-master-0", phase="Running", attempt=0, ranks=[0], node="n",
              isolation="cgroup-v1", peak_memory_bytes=10, cpu_seconds=1.0)  # fmt: skip
    workload = Workload(phase="Running", attempt=0, pods=[pod])

    def polled(phase: str, peak: int, cpu: float, isolation: str = "cgroup-v1") -> BackendStatus:
        ps = PodStatus("w-master-0", "master", 0, phase, "n", attempt=0, ranks=(0,),
                       peak_memory_bytes=peak, cpu_seconds=cpu, isolation=isolation)  # fmt: skip
        return BackendStatus("Running", pods=[ps])

    def status_changes(workload: Workload, status: BackendStatus) -> bool:
        return bool(status_diff(workload, status, restarts_in_place=True))

    assert not status_changes(workload, polled("Running", 20, 2.0))  # a rise alone: no write
    assert status_changes(workload, polled("Running", 10, 1.0, "cgroup-v2"))
    pod.phase = "Succeeded"
    assert status_changes(workload, polled("Succeeded", 20, 2.0))  # the final figures
    record_usage(pod, polled("Succeeded", 20, 2.0).pods[0])
    assert (pod.peak_memory_bytes, pod.cpu_seconds) == (20, 2.0)
    assert not status_changes(workload, polled("Succeeded", 20, 2.0))
    record_usage(pod, polled("Succeeded", None, None, "").pods[0])  # type: ignore[arg-type]
    assert (pod.peak_memory_bytes, pod.cpu_seconds, pod.isolation) == (20, 2.0, "cgroup-v1")


def test_a_cgroup_busy_for_a_moment_after_its_kill_is_removed_once_free(tmp_path: Path) -> None:
    """In v1 a task just killed leaves each hierarchy on its own: rmdir may say EBUSY
    for a moment after another hierarchy's list is empty (seen in a suite run); remove
    tries again instead of failing the stop."""
    import errno

    from ringleader.server.backends.local.cgroups import Hierarchy

    class BusyTwice(Hierarchy):
        tries = 0

        def rmdir(self, path: Path) -> None:
            self.tries += 1
            if self.tries <= 2:
                raise OSError(errno.EBUSY, "Device or resource busy", str(path))
            path.rmdir()

    (tmp_path / "freezer" / "rl-x").mkdir(parents=True)
    hierarchy = BusyTwice({"freezer": tmp_path / "freezer"})
    hierarchy.remove("rl-x")
    assert not (tmp_path / "freezer" / "rl-x").exists() and hierarchy.tries == 3


def test_a_kill_racing_the_cgroups_removal_is_not_an_error(hierarchy, monkeypatch) -> None:
    """A pod's kill and its removal can race (a stopping server and a failed start's
    cleanup, seen in CI): the freezer's file opens, the cgroup goes, and the kernel
    answers the write with ENODEV. The kill finds nothing left to kill, not an error."""
    from ringleader.server.backends.local import cgroup_versions

    rel = f"rl-race-{uuid.uuid4().hex[:8]}"
    hierarchy.create(rel)
    real_write = cgroup_versions._write

    def removed_between_open_and_write(path: Path, value: str) -> None:
        with open(path, "w") as f:
            hierarchy.remove(rel)
            f.write(value)  # flushed on close, into a cgroup the kernel has removed
        raise AssertionError("the kernel accepted a write into a removed cgroup")

    monkeypatch.setattr(cgroup_versions, "_write", removed_between_open_and_write)
    try:
        assert hierarchy.kill(rel)
    finally:
        monkeypatch.setattr(cgroup_versions, "_write", real_write)
        hierarchy.remove(rel)
    assert not hierarchy.exists(rel)
