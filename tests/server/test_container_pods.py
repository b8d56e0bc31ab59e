"""Pods of a workload with an image run in it (issue 24, item 1): real podman, a real
image built here (tests/fixtures/images.py), a real root server.

What is checked: the podman command a rank becomes (golden); a PyTorch gang in the
image gets the environment a process gang gets (the host's own software paths
aside), inside its pod's cgroup; nothing is left after it ends or is deleted (no
container, no staged mount, no cgroup directory in any controller tree); a
directory a tenant names is mounted as the tenant opened it, so a symlink swapped
in afterwards leads nowhere.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.launch import container_cgroups, container_mounts, containers
from tests.conftest import wait_until
from tests.fixtures.images import (
    job_containers,
    need_podman,
    podman,
    python_image,
    staged_mounts,
)
from tests.fixtures.tenants import Site, tenant_site
from tests.fixtures.terminal import Terminal
from tests.server.conftest import running_server

__all__ = ["python_image", "tenant_site"]  # the fixtures, used by name

ENV_PROBE = (
    "env | sort; echo CGROUP $(grep -E ':memory:' /proc/self/cgroup); "
    'mkdir -p "$RINGLEADER_CHECKPOINT_DIR" && echo kept > "$RINGLEADER_CHECKPOINT_DIR/mark-$RANK"'
)
#: What differs between a rank in an image and one on the host, by design: the image's
#: own software paths (containers.HOST_ONLY), and what a shell sets (PWD, SHLVL, _).
DIFFERS = containers.HOST_ONLY | {"PWD", "SHLVL", "_", "OLDPWD", "HOSTNAME", "container"}


# ----- the command (pure) -----------------------------------------------------------
def test_a_rank_becomes_podman_run_with_names_not_values() -> None:
    env = {"RANK": "1", "SECRET_TOKEN": "s3cr3t", "PATH": "/host/bin", "PYTHONPATH": "/x"}
    argv = containers.run_argv(
        {"runtime": "/usr/bin/podman", "image": "localhost/img:1", "pull": "Never"},
        name="rl-abc-rank1",
        job_id="rl-abc",
        rank=1,
        argv=["python", "-c", "print(1)"],
        env=env,
        cwd="/work",
        account=(1001, 1002),
        mounts=[("/stage/m0", "/work")],
        cgroup="/ringleader/rl-abc/pod-1",
    )
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"]
    assert argv[-5:] == ["--", "localhost/img:1", "python", "-c", "print(1)"]
    pairs = list(itertools.pairwise(argv))
    for pair in [("--user", "1001:1002"), ("--network", "host"), ("--ipc", "host"),
                 ("--pull", "never"), ("--volume", "/stage/m0:/work"), ("--workdir", "/work"),
                 ("--cgroup-parent", "/ringleader/rl-abc/pod-1"), ("--label", "ringleader.job=rl-abc"),
                 ("--env", "RANK"), ("--env", "SECRET_TOKEN")]:  # fmt: skip
        assert pair in pairs, (pair, argv)
    assert "s3cr3t" not in " ".join(argv)  # values come from podman's environment
    assert ("--security-opt", "no-new-privileges") in pairs and ("--cap-drop", "all") in pairs
    assert "--init" not in argv
    init = {"runtime": "podman", "image": "i", "init": True, "interactive": True}
    argv = containers.run_argv(init, name="n", job_id="j", rank=0, argv=["/bin/sh", "-c", "x"],
                               env={}, cwd="/", account=None, mounts=[], cgroup="")  # fmt: skip
    assert "--init" in argv and ("--entrypoint", '["/bin/sh"]') in itertools.pairwise(argv)
    assert ("--env", "PATH") not in pairs and ("--env", "PYTHONPATH") not in pairs


def test_a_pods_gpus_become_the_runtimes_devices_numbered_from_0_inside() -> None:
    """The GPU machines have no container runtime: these arguments are golden-tested."""
    common = {"name": "n", "job_id": "j", "rank": 0, "argv": ["python", "t.py"], "cwd": "/",
              "account": (1000, 1000), "mounts": [], "cgroup": ""}  # fmt: skip
    env = {"CUDA_VISIBLE_DEVICES": "1,3", "RANK": "0"}
    podman = containers.run_argv({"runtime": "/usr/bin/podman", "image": "i"}, env=env, **common)
    pairs = list(itertools.pairwise(podman))
    assert ("--device", "nvidia.com/gpu=1") in pairs and ("--device", "nvidia.com/gpu=3") in pairs
    assert ("--env", "CUDA_VISIBLE_DEVICES") in pairs  # by name: its value is the inside one
    assert containers.gpus_inside("1,3") == "0,1"
    docker = containers.run_argv({"runtime": "/usr/bin/docker", "image": "i"}, env=env, **common)
    assert ("--gpus", "device=1,3") in itertools.pairwise(docker)
    # A pod bound without GPUs ("") sees none, in the container as on the host.
    none = {"CUDA_VISIBLE_DEVICES": ""}
    bare = containers.run_argv({"runtime": "podman", "image": "i"}, env=none, **common)
    assert "--device" not in bare and containers.gpus_inside("") is None


def test_the_pods_cgroup_is_found_from_the_join_files(tmp_path: Path, monkeypatch) -> None:
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    monkeypatch.setenv("RINGLEADER_CGROUP_ROOT", str(v1))
    procs = f"{v1}/memory/srv/ringleader/rl-x/pod-0/cgroup.procs {v1}/pids/x/cgroup.procs"
    assert container_cgroups.cgroup_parent(procs) == "/srv/ringleader/rl-x/pod-0"
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    monkeypatch.setenv("RINGLEADER_CGROUP_ROOT", str(v2))
    assert container_cgroups.cgroup_parent(f"{v2}/ringleader/rl-x/pod-0/cgroup.procs") == (
        "/ringleader/rl-x/pod-0"
    )
    assert container_cgroups.cgroup_parent("") == ""


def test_in_v1_the_memory_trees_path_is_the_parent_and_cpu_limits_go_as_flags(
    tmp_path: Path, monkeypatch
) -> None:
    """The server's cgroup may sit at another path in each v1 controller (here memory's
    is deeper): podman's one --cgroup-parent is memory's, and the pod's CPU limits,
    which then do not contain the container, become podman's own."""
    root = tmp_path / "v1"
    cpu = root / "cpu" / "ringleader" / "rl-x" / "pod-0"
    memory = root / "memory" / "box" / "ringleader" / "rl-x" / "pod-0"
    for made in (cpu, memory):
        made.mkdir(parents=True)
    (cpu / "cpu.shares").write_text("512\n")
    (cpu / "cpu.cfs_quota_us").write_text("150000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    monkeypatch.setenv("RINGLEADER_CGROUP_ROOT", str(root))
    join = f"{cpu}/cgroup.procs {memory}/cgroup.procs"
    assert container_cgroups.cgroup_parent(join) == "/box/ringleader/rl-x/pod-0"
    assert container_cgroups.v1_cpu_flags(join) == [
        "--cpu-shares", "512", "--cpu-period", "100000", "--cpu-quota", "150000"
    ]  # fmt: skip
    same = root / "memory" / "ringleader" / "rl-x" / "pod-0"
    same.mkdir(parents=True)
    assert container_cgroups.v1_cpu_flags(f"{cpu}/cgroup.procs {same}/cgroup.procs") == []


# ----- a real server ------------------------------------------------------------------
@pytest.fixture
def work() -> Iterator[Path]:
    """A working directory every account can enter."""
    made = Path(tempfile.mkdtemp(prefix="rl-ctr-", dir="/var/tmp"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _rank_env(logs: str, pod: str, name: str, workload_id: str) -> dict[str, str]:
    """A pod's ``env`` from the logs, its workload's name and id (and the random part
    of its run directory) made the same for every workload, so two compare."""
    lines = [line.split("] ", 1)[1] for line in logs.splitlines() if line.startswith(f"[{pod}] ")]
    env = dict(line.split("=", 1) for line in lines if "=" in line and " " not in line[:1])
    return {
        k: re.sub(r"-node(\d+)-[0-9a-f]{16}", r"-node\1-X", v)
        .replace(workload_id, "ID")
        .replace(name, "NAME")
        for k, v in env.items()
    }


def test_a_gang_in_an_image_gets_the_process_gangs_environment_and_leaves_nothing(
    python_image: str, tmp_path: Path, work: Path
) -> None:
    with running_server(tmp_path / "home") as server:
        version = podman("version", "--format", "{{.Client.Version}}").stdout.strip()
        nodes = server.cli("nodes", "list").stdout
        assert f": image pods run with podman {version}" in nodes, nodes
        boxed = server.submit_dist("boxed", work, "-i", python_image, command=ENV_PROBE)
        plain = server.submit_dist("plain", work, command=ENV_PROBE)
        for name in ("boxed", "plain"):
            described = server.wait_status(name, {"Completed", "Failed"})
            assert "Status: Completed" in described, described
        boxed_logs, plain_logs = (server.cli("logs", n).stdout for n in ("boxed", "plain"))
        for pod in ("master-0", "worker-0"):
            inside = _rank_env(boxed_logs, f"boxed-{pod}", "boxed", boxed)
            outside = _rank_env(plain_logs, f"plain-{pod}", "plain", plain)
            assert inside and outside
            assert set(outside) - DIFFERS == set(inside) - DIFFERS
            for key in set(outside) - DIFFERS - PER_RUN:
                assert inside[key] == outside[key], (key, inside[key], outside[key])
            assert inside["PATH"] != outside["PATH"]  # the image's own
        # Its checkpoints directory is the run's own, on the host (kept across restarts).
        for rank in (0, 1):
            mark = tmp_path / "home" / "runs" / boxed / "checkpoints" / f"mark-{rank}"
            assert mark.read_text() == "kept\n"
        # Each rank ran inside its pod's cgroup (the container a child of it).
        # Its memory cgroup is below its pod's, wherever the server's own cgroup is in
        # that tree: the pod's memory limit holds, its peak is measured.
        from ringleader.server.backends.local.cgroup_versions import detect

        hierarchy = detect()
        assert hierarchy is not None
        tree = hierarchy.parents.get("memory") or next(iter(hierarchy.parents.values()))
        below = "/" + "/".join(tree.parts[5 if "memory" in hierarchy.parents else 4 :])
        cgroups = re.findall(r"CGROUP \S+:memory:(\S+)", boxed_logs)
        assert len(cgroups) == 2, boxed_logs
        for found in cgroups:
            assert found.startswith(f"{below.rstrip('/')}/rl-{boxed}/boxed-"), (found, below)
            assert "/libpod-" in found, found
        boxed_described = server.cli("describe", "boxed").stdout
        # ISOLATION says the container is in the pod's cgroup (so the pod's limits hold).
        assert len(re.findall(r"cgroup-v\d\S*\+podman", boxed_described)) == 2, boxed_described
        peaks = re.findall(r"boxed-\S+-0\s.*\s(\d+(?:\.\d+)?[KMG]?i?B)\s", boxed_described)
        assert len(peaks) == 2 and all(not p.startswith("0") for p in peaks), boxed_described
        wait_until(lambda: not job_containers(f"rl-{boxed}"), 60, "its containers removed")
        assert not _leftover_cgroups(boxed)
        assert not staged_mounts(f"rl-{boxed}")


HELPER_PYTHON = "/usr/bin/python3"  # the helper runs as the account: one it can run
#: Values of one run alone: its rendezvous port and its pod token.
PER_RUN = {"MASTER_PORT", "RINGLEADER_MASTER_PORT", "RINGLEADER_TOKEN", "MLX_HOSTFILE"}


def _leftover_cgroups(workload_id: str, depth: int = 4) -> list[str]:
    """The run's cgroup directories in any controller tree (walked a few levels deep:
    the server's own cgroup, then ``ringleader``), tolerant of removals meanwhile."""
    found, top = [], "/sys/fs/cgroup"
    for here, dirs, _ in os.walk(top, onerror=lambda _e: None):
        if f"rl-{workload_id}" in dirs:
            found.append(f"{here}/rl-{workload_id}")
        keep = here.count("/") - top.count("/") < depth
        dirs[:] = [d for d in dirs if keep and not d.startswith("rl-")]
    return found


def test_an_image_workload_outlives_a_server_kill_9_and_delete_leaves_nothing(
    python_image: str, tmp_path: Path, work: Path
) -> None:
    with running_server(tmp_path / "home") as server:
        workload = server.submit_dist("sleeper", work, "-i", python_image,
                           command="echo up; exec sleep 600")  # fmt: skip
        wait_until(lambda: "up" in server.cli("logs", "sleeper").stdout, 120, "running")
        assert len(job_containers(f"rl-{workload}")) == 2
        # kill -9 of the server: the detached supervisor and its containers go on, and
        # the next server re-adopts the workload (its status, exec, delete).
        server.kill()
        assert len(job_containers(f"rl-{workload}")) == 2
        server.start()
        described = server.cli("describe", "sleeper").stdout
        assert re.search(r"Status:\s+Running", described), described
        # exec is `podman exec` into the pod's container: the image's software, the
        # rank's environment and directory.
        inside = server.cli("exec", "sleeper", "--pod", "worker-0", "--", "sh", "-c",
                            'test -e /run/.containerenv && echo in-image $RANK "$PWD"')  # fmt: skip
        assert (inside.returncode, inside.stdout) == (0, f"in-image 1 {work}\n"), inside.stderr
        assert server.cli("delete", "sleeper").returncode == 0
        wait_until(lambda: not job_containers(f"rl-{workload}"), 120, "its containers removed")
        wait_until(lambda: not _leftover_cgroups(workload), 60, "its cgroups removed")
        marker = f"RINGLEADER_JOB_ID=rl-{workload}".encode()
        wait_until(lambda: not _carrying(marker), 60, "no process of the job left")


def _carrying(marker: bytes) -> list[int]:
    """Processes (the container's included: same kernel) whose environment has ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_an_image_that_is_no_reference_is_refused_naming_the_field(
    tmp_path: Path, work: Path
) -> None:
    need_podman()
    with running_server(tmp_path / "home") as server:
        for image in ("alpine;id", "$(id)", "Upper/Case"):
            done = server.cli("submit-dist", "pytorch", "bad", "--workers", "1", "-i", image,
                              "--command", "--", "true", cwd=str(work))  # fmt: skip
            assert done.returncode == 2 and "error: -i:" in done.stderr, done.stderr  # the flag
            assert "not an image reference" in done.stderr, done.stderr
        assert "bad" not in server.cli("list").stdout  # nothing half-created


def test_an_interactive_image_pod_holds_for_exec_and_bash_in_the_image(
    python_image: str, tmp_path: Path, work: Path
) -> None:
    """Its command runs, then the pod stays up (the image's shell keepalive, not the
    server's Python); exec and a terminal bash run in the container, as its user; a
    suspend stops it by SIGTERM (the rank is not PID 1: podman's init passes it on)."""
    with running_server(tmp_path / "home") as server:
        workload = server.submit_dist("dev", work, "-i", python_image, "--interactive",
                           command="trap 'echo got-term; sleep 1; exit 0' TERM; echo trained; "
                           "sleep 600 & wait")  # fmt: skip
        wait_until(lambda: server.cli("logs", "dev").stdout.count("trained") == 2, 120, "up")
        done = server.cli("exec", "dev", "--", "sh", "-c",
                          'cat /proc/1/comm; echo "rank=$RANK"; id -u')  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1:] == ["rank=0", "0"], done.stdout
        assert done.stdout.splitlines()[0] != "sleep"  # an init is PID 1, not the command
        argv = [sys.executable, "-m", "ringleader", "bash", "dev", "--pod", "worker-0"]
        with Terminal(argv, {**server.env, "TERM": "dumb"}) as shell:
            shell.expect(re.escape("(dev-worker-0)"))  # Debian's prompt names the pod
            shell.type("test -e /run/.containerenv && echo in-image-$RANK; tty\n")
            shell.expect("in-image-1")
            shell.expect("/dev/pts/")
            shell.type("exit 3\n")
            assert shell.wait(timeout=60) == 3, shell.transcript
        # A session whose client goes away leaves nothing in the container (podman
        # exec's process there is conmon's child, not the client's).
        client = subprocess.Popen([sys.executable, "-m", "ringleader", "exec", "dev", "--",
                                   "sleep", "4321"], env=server.env)  # fmt: skip
        try:
            wait_until(lambda: _running_argv([b"sleep", b"4321"]), 60, "the session's sleep")
        finally:
            client.kill()
            client.wait()
        wait_until(lambda: not _running_argv([b"sleep", b"4321"]), 60, "the sleep to end")
        assert server.cli("suspend", "dev").returncode == 0
        wait_until(lambda: not job_containers(f"rl-{workload}"), 120, "its containers removed")
        logs = server.cli("logs", "dev").stdout
        # Each rank's command stopped by one TERM (its trap lingers: a second would show).
        assert logs.count("got-term") == 2, logs
        assert server.cli("delete", "dev").returncode == 0


# ----- a tenant's paths, opened as the tenant -----------------------------------------
def test_a_mount_is_what_the_account_opened_not_what_a_link_says_later(
    python_image: str, work: Path
) -> None:
    nobody = pwd.getpwnam("nobody")
    account = (nobody.pw_uid, nobody.pw_gid)
    secret = work / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "key").write_text("secret\n")
    (secret / "key").chmod(0o644)  # readable, were its directory not closed
    mine = work / "mine"
    mine.mkdir(mode=0o755)
    (mine / "file").write_text("mine\n")
    link = work / "link"
    link.symlink_to(secret)
    # A link to what the account cannot enter: refused, nothing staged.
    with pytest.raises(OSError, match="Permission denied"):
        container_mounts.open_as(str(link), account, HELPER_PYTHON)
    # Opened while it was the account's own directory, then swapped for the link.
    fd = container_mounts.open_as(str(mine), account, HELPER_PYTHON)
    mine.rename(work / "moved")
    mine.symlink_to(secret)
    stage = work / "stage"
    stage.mkdir(mode=0o700)
    target = stage / "m0"
    target.mkdir(mode=0o700)
    try:
        container_mounts.bind(fd, str(target))
        os.close(fd)
        seen = podman("run", "--rm", "--user", f"{account[0]}:{account[1]}", "--volume",
                      f"{target}:/w", python_image, "cat", "/w/file")  # fmt: skip
        assert seen.returncode == 0 and seen.stdout == "mine\n", seen.stderr
    finally:
        container_mounts.unstage(str(stage))
    assert str(target) not in Path("/proc/self/mountinfo").read_text()


def test_an_image_that_cannot_be_pulled_fails_at_once_with_the_registrys_reason(
    tmp_path: Path, work: Path
) -> None:
    """Not a crash: no rank starts, no restart is tried, the root cause is the pull's."""
    need_podman()
    image = "registry.invalid/no/such:1"  # .invalid never resolves (RFC 2606)
    with running_server(tmp_path / "home") as server:
        workload = server.submit_dist("nopull", work, "-i", image, command="true")
        described = server.wait_status("nopull", {"Failed", "Completed"})
        assert "Status: Failed" in described, described
        assert f"cannot pull image {image}" in described and "registry.invalid" in described
        assert "Restart" not in described, described  # backoffLimit untouched
        assert not job_containers(f"rl-{workload}")
        # Never: an image not in the store is not pulled; the gang fails saying so.
        never = "localhost/not/here:1"
        server.submit_dist("never", work, "-i", never, "--image-pull-policy", "Never",
                command="true")  # fmt: skip
        described = server.wait_status("never", {"Failed", "Completed"})
        assert f"image {never} is not on this host and its pull policy is Never" in described


def test_a_pull_that_hangs_fails_the_gang_after_the_servers_timeout_leaving_nothing(
    tmp_path: Path, work: Path
) -> None:
    """A registry that accepts and never answers: the pull is cut at
    ``--image-pull-timeout``, the gang fails saying so (no restart), and no pull,
    container or staged mount is left."""
    need_podman()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        held: list[socket.socket] = []
        stop = threading.Event()

        def hold() -> None:
            listener.settimeout(0.2)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    held.append(listener.accept()[0])  # and never a byte back

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        image = f"127.0.0.1:{listener.getsockname()[1]}/hangs/here:1"
        try:
            with running_server(tmp_path / "home", "--image-pull-timeout", "3") as server:
                workload = server.submit_dist("hang", work, "-i", image, command="true")
                described = server.wait_status("hang", {"Failed", "Completed"}, timeout=120)
                assert "Status: Failed" in described, described
                assert f"pulling image {image} did not finish in 3 s" in described, described
                assert "Restart" not in described
                assert held, "the pull reached the registry"
                assert not job_containers(f"rl-{workload}")
                assert not [p for p in _carrying_arg(image.encode())], "a pull left running"
        finally:
            stop.set()
            holder.join()
            for conn in held:
                conn.close()


def _running_argv(argv: list[bytes]) -> list[int]:
    """Processes (a container's included: same kernel) whose command line is ``argv``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:-1] == argv:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _carrying_arg(word: bytes) -> list[int]:
    """Processes with ``word`` among their arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_after_the_supervisor_and_agent_are_killed_the_server_removes_the_containers(
    python_image: str, tmp_path: Path, work: Path
) -> None:
    """kill -9 of everything but the containers (supervisor, agent, the podman clients:
    the run's supervisor cgroup): the server notices, fails the run and sweeps it."""
    from ringleader.server.backends.local.cgroup_versions import detect

    hierarchy = detect()
    assert hierarchy is not None
    with running_server(tmp_path / "home") as server:
        workload = server.submit_dist("orphan", work, "-i", python_image,
                           command="echo up; exec sleep 600")  # fmt: skip
        wait_until(lambda: "up" in server.cli("logs", "orphan").stdout, 120, "running")
        for pid in hierarchy.pids(f"rl-{workload}/supervisor"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        described = server.wait_status("orphan", {"Failed"}, timeout=120)
        assert "Status: Failed" in described
        wait_until(lambda: not job_containers(f"rl-{workload}"), 120, "its containers removed")
        wait_until(lambda: not _leftover_cgroups(workload), 60, "its cgroups removed")
        marker = f"RINGLEADER_JOB_ID=rl-{workload}".encode()
        wait_until(lambda: not _carrying(marker), 60, "no process of the job left")
        assert not staged_mounts(f"rl-{workload}")


def test_under_per_user_accounts_the_container_runs_as_the_submitters_account(
    python_image: str, site: Site
) -> None:
    """A root server with per-user accounts: the rank in the image is the user's OS
    account, its checkpoint directory (in that account's home) is mounted and its own,
    and an exec session in its container is that account too."""
    creds = site.user("cora")
    probe = 'id -u; echo x > "$RINGLEADER_CHECKPOINT_DIR/made"; echo DONE'
    done = site.as_user(creds, "submit-dist", "pytorch", "boxed", "--workers", "1", "-i",
                        python_image, "--interactive", "--command", "--", "sh", "-c", probe)  # fmt: skip
    assert done.returncode == 0, done.stderr
    logs = site.wait_logs("boxed", "[boxed-master-0] DONE")
    account = pwd.getpwnam(f"{site.prefix}-cora")
    assert f"[boxed-master-0] {account.pw_uid}" in logs, logs
    made = Path(account.pw_dir) / "ringleader" / site.workload_id("boxed") / "checkpoints" / "made"
    wait_until(made.exists, 30, "the checkpoint file")
    assert made.stat().st_uid == account.pw_uid
    # A session in its container is the same account (podman exec --user).
    inside = site.as_user(creds, "exec", "boxed", "--", "sh", "-c",
                          "id -u; echo $RINGLEADER_TOKEN; grep -E '^(NoNewPrivs|CapEff)' "
                          "/proc/self/status")  # fmt: skip
    assert inside.returncode == 0, inside.stderr
    lines = inside.stdout.splitlines()
    assert lines[0] == str(account.pw_uid), inside.stdout
    assert lines[1].strip(), "the submitter's own session keeps its token"
    # No setuid program can give the tenant more (a volume over /etc with su in it).
    status = dict(line.split() for line in lines[2:])
    assert status == {"NoNewPrivs:": "1", "CapEff:": "0000000000000000"}, inside.stdout
    assert site.as_user(creds, "delete", "boxed").returncode == 0
    # A shared server lets pods mount no host directory until its admin names some.
    done = site.as_user(creds, "submit-dist", "pytorch", "vol", "--workers", "1", "-i",
                        python_image, "-v", "/etc:/x", "--command", "--", "true")  # fmt: skip
    assert done.returncode == 2 and "error: -v:" in done.stderr, done.stderr
    assert "(allowed: none; its admin names them with" in done.stderr, done.stderr


def test_python_is_the_images_and_args_alone_go_to_its_entrypoint(
    python_image: str, tmp_path: Path, work: Path
) -> None:
    """Kubernetes' rule: ``--command`` replaces the image's entrypoint; arguments alone
    are its entrypoint's; and ``python`` is the image's own, not the server's."""
    entry = "localhost/ringleader-test/entrypoint:1"
    (work / "Containerfile").write_text(
        f'FROM {python_image}\nENTRYPOINT ["echo", "from-entrypoint"]\nCMD ["default-args"]\n'
    )
    built = podman("build", "--pull=never", "-t", entry, str(work), timeout=300)
    assert built.returncode == 0, built.stderr
    try:
        with running_server(tmp_path / "home") as server:
            done = server.cli("submit-dist", "pytorch", "own", "--workers", "1", "-i", python_image,
                              "--command", "--", "python3", "-c",
                              "import sys; print('PY', sys.executable)", cwd=str(work))  # fmt: skip
            assert done.returncode == 0, done.stderr
            args = server.cli("submit-dist", "pytorch", "args", "--workers", "1", "-i", entry,
                              "--", "hello", cwd=str(work))  # fmt: skip
            assert args.returncode == 0, args.stderr
            bare = server.cli("submit-dist", "pytorch", "bare", "--workers", "1", "-i", entry,
                              cwd=str(work))  # fmt: skip
            assert bare.returncode == 0, bare.stderr
            held = server.cli("submit-dist", "pytorch", "held", "--workers", "1", "-i", entry,
                              "--interactive", "--", "hello", cwd=str(work))  # fmt: skip
            assert held.returncode == 0, held.stderr
            for name in ("own", "args", "bare"):
                assert "Status: Completed" in server.wait_status(name, {"Completed", "Failed"})
            # Interactive: the entrypoint with the arguments, then the pod holds.
            wait_until(
                lambda: server.cli("logs", "held").stdout.count("stays up") == 2, 120, "held"
            )
            held_logs = server.cli("logs", "held").stdout
            assert "[held-worker-0] from-entrypoint hello" in held_logs, held_logs
            assert "[own-master-0] PY /usr/bin/python3" in server.cli("logs", "own").stdout
            assert "[args-worker-0] from-entrypoint hello" in server.cli("logs", "args").stdout
            bare_logs = server.cli("logs", "bare").stdout
            assert "[bare-master-0] from-entrypoint default-args" in bare_logs, bare_logs
    finally:
        podman("rmi", "--force", entry)
