"""launch.podstats: CPU and memory per pod, from a real busy process (its session or its
cgroup), and the file's bounds: a cap, no link followed, nothing without a metrics dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.launch import podstats
from ringleader.launch.plan import RANK_ENV
from ringleader.runtime.metrics import METRICS_DIR
from ringleader.server.backends.local.cgroup_versions import detect
from ringleader.server.backends.local.cgroups import JOIN_VAR, join_argv
from tests.conftest import require, wait_until

# Allocates and touches 64 MiB, says so, then burns CPU until killed.
BUSY = (
    "import sys; held = bytearray(64 * 1024 * 1024); held[::4096] = b'x' * len(held[::4096]);"
    " print('ready', flush=True)\nwhile True: sum(range(10000))"
)
MEMORY_FLOOR = 60 * 1024 * 1024


def samples(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc
    proc.kill()
    proc.wait()


def test_a_busy_rank_session_shows_cpu_and_memory(tmp_path: Path, busy) -> None:
    env = {podstats.METRICS_DIR: str(tmp_path), podstats.POD_VAR: "job-worker-0"}
    sampler = podstats.Sampler(interval_s=0.1, first_s=0.01)
    try:
        sampler.watch(busy.pid, env)
        path = tmp_path / "pod-job-worker-0.resources.jsonl"

        def busy_sample() -> bool:
            return any(
                (s["cpu"] or 0) > 0.1 and s["memoryBytes"] > MEMORY_FLOOR for s in samples(path)
            )

        wait_until(busy_sample, 60, "a sample with CPU and 64 MiB")
        first = samples(path)[0]
        assert first["cpu"] is None and first["time"] > 0  # no interval before the first
    finally:
        sampler.close()
    # The rank ended: nothing more is said of its pod.
    busy.kill()
    busy.wait()
    sampler.forget(busy.pid)
    count = len(samples(path))
    sampler.sample()
    assert len(samples(path)) == count


def test_a_pod_cgroup_is_read_from_the_kernel(tmp_path: Path) -> None:
    hierarchy = detect()
    require(hierarchy is not None, "a writable cgroupfs (root)")
    assert hierarchy is not None
    rel = f"rl-podstats-{uuid.uuid4().hex[:8]}/pod"
    hierarchy.create(rel)
    join = " ".join(hierarchy.procs_files(rel))
    proc = subprocess.Popen(
        join_argv([sys.executable, "-c", BUSY]),
        stdout=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, JOIN_VAR: join},
    )
    env = {podstats.METRICS_DIR: str(tmp_path), podstats.POD_VAR: "p", podstats.CGROUP_VAR: join}
    sampler = podstats.Sampler(interval_s=0.1, first_s=0.01)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        alive, cpu, memory = podstats.cgroup_usage([os.path.dirname(p) for p in join.split()])
        assert alive and cpu is not None and cpu > 0 and memory is not None
        assert memory > MEMORY_FLOOR
        sampler.watch(proc.pid, env)
        path = tmp_path / "pod-p.resources.jsonl"
        wait_until(
            lambda: any((s["cpu"] or 0) > 0.1 for s in samples(path)), 60, "a busy cgroup sample"
        )
    finally:
        sampler.close()
        proc.kill()
        proc.wait()
        hierarchy.kill(rel.split("/")[0])
        hierarchy.remove(rel.split("/")[0])


def test_cgroup_v2_files_are_read(tmp_path: Path) -> None:
    """The v2 names (this kernel is v1): cpu.stat's usage_usec, memory.current less
    the inactive page cache."""
    (tmp_path / "cgroup.procs").write_text("42\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (tmp_path / "memory.current").write_text("1000000\n")
    (tmp_path / "memory.stat").write_text("anon 900000\ninactive_file 200000\n")
    assert podstats.cgroup_usage([str(tmp_path)]) == (True, 2.5, 800000)
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "memory.current").unlink()  # no memory controller here
    assert podstats.cgroup_usage([str(tmp_path)]) == (False, 2.5, None)


def test_bounds_a_cap_no_link_and_no_metrics_dir(tmp_path: Path, monkeypatch, busy) -> None:
    monkeypatch.setattr(podstats, "MAX_FILE_BYTES", 200)
    sampler = podstats.Sampler(interval_s=3600, first_s=3600)  # sampled by hand here
    sampler.watch(busy.pid, {podstats.METRICS_DIR: str(tmp_path), podstats.POD_VAR: "a"})
    for _ in range(10):
        sampler.sample()
    lines = (tmp_path / "pod-a.resources.jsonl").read_text().splitlines()
    assert lines[-1] == '{"capped": true}' and len(lines) < 10
    assert all(json.loads(line)["memoryBytes"] > 0 for line in lines[:-1])

    target = tmp_path / "target"
    target.write_text("untouched\n")
    (tmp_path / "pod-b.resources.jsonl").symlink_to(target)
    sampler.watch(busy.pid, {podstats.METRICS_DIR: str(tmp_path), podstats.POD_VAR: "b"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    account = tmp_path / "account"  # a directory someone else can change (an account's)
    account.mkdir()
    account.chmod(0o777)
    (account / "linked").symlink_to(elsewhere)  # an account's planted directory link
    sampler.watch(busy.pid, {podstats.METRICS_DIR: str(account / "linked"), podstats.POD_VAR: "d"})
    sampler.sample()
    assert target.read_text() == "untouched\n" and not list(elsewhere.iterdir())
    sampler.close()

    # Its names are the planners' (not imported: the agent's start-up stays light).
    assert podstats.CGROUP_VAR == JOIN_VAR and podstats.RANK_ENV == RANK_ENV
    assert podstats.METRICS_DIR == METRICS_DIR
    plain = podstats.Sampler()
    plain.watch(busy.pid, {podstats.POD_VAR: "c"})  # plain ringleader launch
    assert plain.thread is None and not plain.pods
