"""Cgroup v2 against a real unified hierarchy, whatever this host's main one is.

The fixture mounts a fresh cgroup2 instance (``mount -t cgroup2 none DIR``: the
host's one unified tree, whose controllers may all be bound to v1 trees, as on
a hybrid host where only ``hugetlb`` is left) and unmounts it after.  Real
processes, ``env -i setsid`` daemons included, run in cgroups there: tracked,
frozen, killed on stop and completion, removed.  Limits the tree cannot set
(no ``memory``/``cpu`` controller handed down) are skipped and named by the
isolation, not an error.  Needs root (CI=true: fails without it).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.server.backends.local import LocalBackend
from ringleader.server.backends.local.cgroup_versions import CgroupV2, detect
from ringleader.server.backends.local.cgroups import ROOT_VAR, V2_LIMITING
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
from tests.helpers.local_backend import make_request, wait_lines


@pytest.fixture(scope="module")
def v2_root() -> Iterator[Path]:
    require(os.geteuid() == 0, "root (to mount cgroup2)")
    mount_point = Path(tempfile.mkdtemp(prefix="rl-cgroup2-"))
    mounted = subprocess.run(
        ["mount", "-t", "cgroup2", "none", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        mount_point.rmdir()
        require(False, f"a cgroup2 mount ({mounted.stderr.strip()})")
    try:
        yield mount_point
    finally:
        with contextlib.suppress(OSError):  # ringleader's parent, when no run is left in it
            (mount_point / "ringleader").rmdir()
        subprocess.run(["umount", str(mount_point)], check=False)
        mount_point.rmdir()


def expected_isolation(root: Path) -> str:
    """What the tree can limit, read from the kernel independently of the code."""
    available = (root / "cgroup.controllers").read_text().split()
    missing = [c for c in V2_LIMITING if c not in available]
    return "cgroup-v2" + (f"-without-{','.join(missing)}" if missing else "")


@pytest.fixture(scope="module")
def hierarchy(v2_root: Path) -> Iterator[CgroupV2]:
    """A parent of this module's own, so nothing else on the host is touched."""
    found = CgroupV2({"unified": v2_root / f"ringleader-test-{uuid.uuid4().hex[:8]}"})
    found.create(".")
    try:
        yield found
    finally:
        found.remove(".")


@pytest.fixture
def backend(hierarchy: CgroupV2, tmp_path: Path) -> Iterator[LocalBackend]:
    made = LocalBackend(grace_s=1.0, cgroups=hierarchy)
    yield made
    for launch in tmp_path.rglob("launch.json"):  # a test that failed half-way
        made.cancel(str(launch.parent))


def frozen(hierarchy: CgroupV2, rel: str) -> str:
    events = (hierarchy.top / rel / "cgroup.events").read_text().split()
    return events[events.index("frozen") + 1]


def test_a_real_v2_root_is_found_and_names_the_limits_it_cannot_set(
    v2_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = detect(v2_root)
    assert isinstance(found, CgroupV2), found
    assert found.parents == {"unified": v2_root / "ringleader"}
    assert found.isolation == expected_isolation(v2_root)
    monkeypatch.setenv(ROOT_VAR, str(v2_root))  # how a server is pointed at it
    again = detect()
    assert isinstance(again, CgroupV2) and again.parents == found.parents


def test_v2_tracks_freezes_and_kills_daemons_that_left_the_session(
    backend: LocalBackend, hierarchy: CgroupV2, v2_root: Path, tmp_path: Path
) -> None:
    seconds = unique_seconds()
    request = make_request(tmp_path / "run", workers=1, command=escaping_command(seconds, "wait"))
    handle = backend.start(request)
    run_id = f"rl-{request.workload_id}"
    wait_lines(backend, handle, "daemons up", 2)
    daemons = wait_until(lambda: (d := processes_with_arg(seconds)) and len(d) == 4 and d, 30)
    assert set(daemons) <= hierarchy.pids(run_id)  # env -i, setsid: still the run's
    where = f"0::/{hierarchy.top.relative_to(v2_root)}/{run_id}/"
    for pid in daemons:
        assert where in Path(f"/proc/{pid}/cgroup").read_text(), pid
    assert {p.isolation for p in backend.poll(handle).pods} == {expected_isolation(v2_root)}
    hierarchy.freeze(run_id, True)  # every process of the run, at once
    try:
        assert frozen(hierarchy, run_id) == "1"
    finally:
        hierarchy.freeze(run_id, False)
    assert frozen(hierarchy, run_id) == "0"
    backend.cancel(handle)
    assert processes_with_arg(seconds) == []
    assert cgroup_dirs(hierarchy, run_id) == []
    assert backend.poll(handle).phase == "Stopped"


def test_v2_completion_ends_a_daemon_and_measures_what_the_tree_can(
    backend: LocalBackend, hierarchy: CgroupV2, v2_root: Path, tmp_path: Path
) -> None:
    status, _ = completed_after_a_daemon(backend, hierarchy, tmp_path)
    memory = "memory" in (v2_root / "cgroup.controllers").read_text().split()
    for pod in status.pods:
        assert pod.cpu_seconds is not None and pod.cpu_seconds > 0  # cpu.stat: every cgroup
        if memory:
            assert pod.peak_memory_bytes is not None and pod.peak_memory_bytes >= BURN_MB << 20
        else:  # no memory controller: not measured, and not guessed
            assert pod.peak_memory_bytes is None


def test_v2_limits_it_cannot_set_are_skipped_and_the_run_still_runs(
    backend: LocalBackend, hierarchy: CgroupV2, v2_root: Path, tmp_path: Path
) -> None:
    compute = {"cpuMemoryLimit": "100Mi", "cpuCoreLimit": 0.25, "cpuCoreRequest": 0.5}
    request = make_request(tmp_path / "run", workers=1, command="sleep 60", compute=compute)
    handle = backend.start(request)  # no error, whatever the tree can limit
    pod = f"rl-{request.workload_id}/job-worker-0"
    wait_until(lambda: len(hierarchy.pids(pod)) == 1, 30, "the worker in its cgroup")
    available = (v2_root / "cgroup.controllers").read_text().split()
    limits = hierarchy.top / pod
    if "memory" in available:
        assert (limits / "memory.max").read_text().strip() == str(100 << 20)
    else:
        assert not (limits / "memory.max").exists()
    if "cpu" in available:
        assert (limits / "cpu.max").read_text().split() == ["25000", "100000"]
    else:
        assert not (limits / "cpu.max").exists()
    status = backend.poll(handle)
    assert status.phase == "Running", status.message
    assert {p.isolation for p in status.pods} == {expected_isolation(v2_root)}
    backend.cancel(handle)
    assert cgroup_dirs(hierarchy, f"rl-{request.workload_id}") == []


def test_a_server_on_a_v2_root_shows_its_isolation_and_ends_escaped_daemons(
    v2_root: Path, tmp_path: Path
) -> None:
    from tests.server.conftest import ServerProcess

    seconds = unique_seconds()
    server = ServerProcess(tmp_path / "home")
    server.env[ROOT_VAR] = str(v2_root)
    parent = CgroupV2({"unified": v2_root / "ringleader"})
    server.start()
    try:
        script = tmp_path / "escape.sh"
        script.write_text(
            f"env -u RINGLEADER_JOB_ID setsid sleep {seconds} &\n"
            f"env -i setsid sleep {seconds} &\necho daemons up\nwait\n"
        )
        sub = server.cli("submit-dist", "pytorch", "v2", "--workers", "1", "--", "sh", str(script))
        assert sub.returncode == 0, sub.stderr
        wait_until(lambda: len(processes_with_arg(seconds)) == 4, 60, "4 daemons")
        described = describe_pods(server, "v2")
        rows = pod_rows(described, "v2")
        assert len(rows) == 2 and {row[-1] for row in rows} == {expected_isolation(v2_root)}
        (run,) = [p.name for p in (server.home / "runs").iterdir()]
        assert cgroup_dirs(parent, f"rl-{run}")
        assert server.cli("delete", "v2").returncode == 0
        wait_until(lambda: server.cli("describe", "v2").returncode != 0, 60, "deleted")
        wait_until(lambda: not processes_with_arg(seconds), 30, "no daemon left")
        assert cgroup_dirs(parent, f"rl-{run}") == []
    finally:
        server.kill()
        for run_dir in (server.home / "runs").glob("*"):
            LocalBackend(grace_s=1.0, cgroups=parent).cancel(str(run_dir))
