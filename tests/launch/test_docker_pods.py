"""Pods in an image run by docker instead of podman (issue 24: "docker where present"):
a real private ``dockerd`` (tests/fixtures/docker.py) reached through ``DOCKER_HOST``,
the same test image as podman's.

What is checked: the command a rank becomes in docker's words (golden); ``launch
--container-runtime docker`` runs every rank in docker with the gang's environment, a
failing rank's code is the launch's, and neither its end nor the launcher's kill -9
leaves a container; a server started with ``--container-runtime docker`` runs an image
workload there, says so, keeps its daemon's address from every pod (in an image or
not), and its delete leaves no container.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.launch import container_runtime, containers, detached
from ringleader.launch.image_pin import image_id
from tests.conftest import require, wait_until
from tests.fixtures.docker import Docker, docker_daemon, docker_image, python_image
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)
from tests.server.conftest import ServerProcess, stop_workloads

__all__ = ["docker_daemon", "docker_image", "python_image"]  # the fixtures, used by name
RL = [sys.executable, "-m", "ringleader"]
IN_DOCKER = 'test -e /.dockerenv && echo "in-docker rank $RANK/$WORLD_SIZE as $(id -u)"'


# ----- the command and the environment (pure) ---------------------------------------
def test_a_rank_becomes_docker_run_in_dockers_words() -> None:
    argv = containers.run_argv(
        {"runtime": "/usr/bin/docker", "image": "i", "interactive": True},
        name="n", job_id="j", rank=0, argv=["/bin/sh", "-c", "x"],
        env={"RANK": "0", "DOCKER_HOST": "unix:///srv.sock", container_runtime.AGENT_ONLY_VAR:
             "DOCKER_HOST"}, cwd="/", account=None, mounts=[], cgroup="",
    )  # fmt: skip
    pairs = list(itertools.pairwise(argv))
    # docker takes the entrypoint as one word (podman a JSON list).
    assert ("--entrypoint", "/bin/sh") in pairs and argv[-3:] == ["i", "-c", "x"]
    assert ("--env", "RANK") in pairs
    assert ("--env", "DOCKER_HOST") not in pairs  # the host's daemon: never a pod's
    assert ("--env", container_runtime.AGENT_ONLY_VAR) not in pairs


def _runtime_whose_rm_removes_after(monkeypatch, refusals: int) -> list[list[str]]:
    """A runtime CLI stand-in: the job has containers c1 and c2 until an ``rm`` that
    comes after ``refusals`` refused ones (each leaves them listed, as a container
    caught "Stopping" by a killed client does)."""
    ran: list[list[str]] = []
    left = {"ids": "c1\nc2\n", "refusals": refusals}

    def run(argv: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        if argv[1] == "rm":
            if left["refusals"]:
                left["refusals"] -= 1
                return subprocess.CompletedProcess(argv, 125, "", "container state improper")
            left["ids"] = ""
        return subprocess.CompletedProcess(argv, 0, left["ids"] if argv[1] == "ps" else "", "")

    monkeypatch.setattr(subprocess, "run", run)
    return ran


def test_removing_a_jobs_containers_speaks_each_runtimes_cli(monkeypatch) -> None:
    ran = _runtime_whose_rm_removes_after(monkeypatch, refusals=0)
    assert containers.remove_job("/usr/bin/docker", "rl-x") == ["c1", "c2"]
    assert ran[0][1:3] == ["ps", "--all"] and "label=ringleader.job=rl-x" in ran[0]
    assert ran[1] == ["/usr/bin/docker", "rm", "--force", "c1", "c2"]  # docker's rm: no --time
    assert ran[2][1] == "ps" and len(ran) == 3  # checked once more: none left, done
    ran = _runtime_whose_rm_removes_after(monkeypatch, refusals=0)
    containers.remove_job("/usr/bin/podman", "rl-x")
    assert ran[1] == ["/usr/bin/podman", "rm", "--force", "--time", "0", "c1", "c2"]


def test_a_container_that_outlives_one_rm_is_removed_again(monkeypatch) -> None:
    """The leftover of stop 39's full run: a container left "Stopping" survived the one
    ``rm`` the server's sweep made, and nothing removed it after."""
    ran = _runtime_whose_rm_removes_after(monkeypatch, refusals=2)
    assert containers.remove_job("/usr/bin/podman", "rl-x") == ["c1", "c2"]
    assert [argv[1] for argv in ran].count("rm") == 3
    assert ran[-1][1] == "ps"  # it stopped only once the list was empty


def test_removal_gives_up_at_its_deadline_when_a_container_never_goes(monkeypatch) -> None:
    ran = _runtime_whose_rm_removes_after(monkeypatch, refusals=10**6)
    assert containers.remove_job("/usr/bin/podman", "rl-x", timeout_s=0.5) == ["c1", "c2"]
    assert 1 <= [argv[1] for argv in ran].count("rm") < 20


def test_a_servers_runtime_settings_reach_its_agents_but_no_rank(monkeypatch) -> None:
    server = {"PATH": "/bin", "DOCKER_HOST": "unix:///s.sock", "DOCKER_CONFIG": "/root/.d",
              "RINGLEADER_HOME": "/srv/home", "AWS_SECRET_ACCESS_KEY": "k"}  # fmt: skip
    supervisor = detached.scoped_environ(server)
    assert supervisor == {"PATH": "/bin", "DOCKER_HOST": "unix:///s.sock",
                          "DOCKER_CONFIG": "/root/.d"}  # fmt: skip
    container_runtime.agent_only(supervisor)  # as the supervisor does before its agents
    rank = dict(supervisor)  # what an agent copies for a rank
    container_runtime.drop_agent_only(rank)
    assert rank == {"PATH": "/bin"}
    # A launch without a server marks nothing: the user's own ranks keep their shell's.
    own = {"PATH": "/bin", "DOCKER_HOST": "unix:///mine.sock"}
    container_runtime.drop_agent_only(own)
    assert own == {"PATH": "/bin", "DOCKER_HOST": "unix:///mine.sock"}


# ----- a node's probe ----------------------------------------------------------------
def test_a_node_with_both_runtimes_names_the_one_its_server_prefers(
    via_docker: Docker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's command line (what ssh runs on a node, here by ``sh -c`` as sshd
    would) carries a ``--container-runtime docker`` server's choice, so ``nodes list``
    names the runtime the node's image pods will run with, not merely the first."""
    from ringleader.server.ssh_nodes import probe_command

    def probed() -> str:
        done = subprocess.run(["sh", "-c", probe_command(sys.executable, "node")],
                              capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
        return str(json.loads(done.stdout)["containerRuntime"])

    monkeypatch.delenv(container_runtime.RUNTIME_VAR, raising=False)
    assert probed().startswith("podman ")
    monkeypatch.setenv(container_runtime.RUNTIME_VAR, "docker")
    version = via_docker("version", "--format", "{{.Client.Version}}").stdout.strip()
    assert probed() == f"docker {version}"
    monkeypatch.setenv(container_runtime.RUNTIME_VAR, "docker; touch /tmp/rl-x")  # not sent
    assert probe_command("python3", "node").startswith("python3 -c ")


# ----- an SSH node with docker only --------------------------------------------------
def test_an_ssh_node_with_docker_only_gets_images_by_sync_and_runs_ranks_in_docker(
    via_docker: Docker, docker_image: str, make_test_hosts, tmp_path: Path
) -> None:
    """A netns host whose podman is hidden and whose sshd points at the private
    daemon (``SetEnv DOCKER_HOST``): doctor names the missing image, ``image sync``
    copies it with ``docker load`` (the same ID as podman's here), a second sync
    copies nothing, and a gang there runs each rank in docker, leaving no container.
    (docker's daemon runs in this machine's network namespace, not the host's: the
    ranks here need no network.)"""
    net: TestHostNetwork = make_test_hosts(
        1, hidden_dirs={0: ["/usr/bin/podman"]},
        sshd_options={"SetEnv": f"DOCKER_HOST={via_docker.host}"},
    )  # fmt: skip
    host = net.hosts[0].address
    assert net.ssh(host, "command -v podman || echo none").stdout.strip() == "none"
    made = subprocess.run("cd /etc && tar -cf - hostname | podman import - localhost/rl-dk-sync:1",
                          shell=True, capture_output=True, text=True, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        wanted = image_id("podman", "localhost/rl-dk-sync:1")
        ssh = ["--ssh-config", str(net.ssh_config)]
        doctor = [*RL, "doctor", host, "--image", "localhost/rl-dk-sync:1", "--no-bandwidth",
                  "--min-free-gb", "0.01", "--json", *ssh]  # fmt: skip
        drift = subprocess.run(doctor, capture_output=True, text=True, timeout=300, check=False)
        checks = json.loads(drift.stdout)["hosts"][0]["checks"]["image"]
        assert checks["detail"] == "no localhost/rl-dk-sync:1 there", checks
        sync = [*RL, "image", "sync", "localhost/rl-dk-sync:1", host, *ssh]
        first = subprocess.run(sync, capture_output=True, text=True, timeout=300, check=False)
        assert first.returncode == 0, first.stdout + first.stderr
        assert f"{host}: copied ({wanted[:12]})" in first.stdout, first.stdout
        there = via_docker("image", "inspect", "--format", "{{.Id}}", "localhost/rl-dk-sync:1")
        assert there.stdout.strip().removeprefix("sha256:") == wanted, there
        again = subprocess.run(sync, capture_output=True, text=True, timeout=300, check=False)
        assert f"{host}: has it already ({wanted[:12]})" in again.stdout, again.stdout
        healed = subprocess.run(doctor, capture_output=True, text=True, timeout=300, check=False)
        assert json.loads(healed.stdout)["hosts"][0]["checks"]["image"]["ok"], healed.stdout
    finally:
        via_docker("rmi", "localhost/rl-dk-sync:1")
        subprocess.run(["podman", "rmi", "localhost/rl-dk-sync:1"], capture_output=True,
                       check=False)  # fmt: skip
    ran = _launch("-H", f"{host}:2", *ssh, "--run-id", "rl-dk-ssh", "--image", docker_image,
                  "--", "sh", "-c", IN_DOCKER, cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for rank in (0, 1):
        assert f"in-docker rank {rank}/2 as {os.getuid()}" in ran.stdout, ran.stdout
    assert via_docker.job_containers("rl-dk-ssh") == []


# ----- launch ------------------------------------------------------------------------
@pytest.fixture
def via_docker(docker_daemon: Docker, monkeypatch: pytest.MonkeyPatch) -> Docker:
    """This test's processes (the CLI, a server and its cleanup) reach the private daemon."""
    monkeypatch.setenv("DOCKER_HOST", docker_daemon.host)
    return docker_daemon


def _launch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RL, "launch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def test_launch_runs_every_rank_in_docker_and_a_failure_leaves_no_container(
    via_docker: Docker, docker_image: str, tmp_path: Path
) -> None:
    done = _launch("-n", "2", "--run-id", "rl-dk-env", "--image", docker_image,
                   "--container-runtime", "docker", "--", "sh", "-c", IN_DOCKER, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"in-docker rank {rank}/2 as {os.getuid()}" in done.stdout, done.stdout
    assert via_docker.job_containers("rl-dk-env") == []
    failed = _launch("-n", "2", "--run-id", "rl-dk-fail", "--image", docker_image,
                     "--container-runtime", "docker", "--", "python3", "-c",
                     "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)",
                     cwd=tmp_path)  # fmt: skip
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert re.search(r"rank +: 1\n.*exit code : 3", failed.stderr), failed.stderr
    assert via_docker.job_containers("rl-dk-fail") == []


def test_a_launcher_killed_with_9_leaves_no_docker_container(
    via_docker: Docker, docker_image: str, tmp_path: Path
) -> None:
    launcher = subprocess.Popen(
        [*RL, "launch", "-n", "2", "--run-id", "rl-dk-kill", "--image", docker_image,
         "--container-runtime", "docker", "--", "sh", "-c", "echo up; exec sleep 600"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: len(via_docker.job_containers("rl-dk-kill", running=True)) == 2,
                   180, "both ranks' containers running")  # fmt: skip
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        wait_until(lambda: via_docker.job_containers("rl-dk-kill") == [], 120,
                   "its containers removed")  # fmt: skip
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        containers.remove_job("docker", "rl-dk-kill")


def test_a_bad_runtime_is_refused_naming_the_flag(tmp_path: Path) -> None:
    done = _launch("-n", "1", "--image", "x", "--container-runtime", "lxc", "--", "true",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "--container-runtime" in done.stderr, done.stderr
    assert "'lxc'" in done.stderr and "podman" in done.stderr, done.stderr
    done = _launch("-n", "1", "--container-runtime", "docker", "--", "true", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--container-runtime: needs --image IMAGE" in done.stderr, done.stderr


# ----- a server ----------------------------------------------------------------------
@pytest.fixture
def work() -> Iterator[Path]:
    """A working directory every account can enter."""
    made = Path(tempfile.mkdtemp(prefix="rl-dk-", dir="/var/tmp"))
    made.chmod(0o755)
    yield made
    subprocess.run(["rm", "-rf", str(made)], check=False)


ENV_PROBE = IN_DOCKER + '; echo "daemon:${DOCKER_HOST:-none}:${RINGLEADER_AGENT_ONLY_ENV:-none}"'
PLAIN_PROBE = 'echo "daemon:${DOCKER_HOST:-none}:${RINGLEADER_AGENT_ONLY_ENV:-none}"'


def test_a_server_with_docker_runs_image_pods_there_and_keeps_its_socket_from_them(
    via_docker: Docker, docker_image: str, tmp_path: Path, work: Path
) -> None:
    server = ServerProcess(tmp_path / "home", "--container-runtime", "docker")
    server.start()
    try:
        version = via_docker("version", "--format", "{{.Client.Version}}").stdout.strip()
        nodes = server.cli("nodes", "list").stdout
        assert f": image pods run with docker {version}" in nodes, nodes
        boxed = server.submit_dist("boxed", work, "-i", docker_image, command=ENV_PROBE)
        server.submit_dist("plain", work, command=PLAIN_PROBE)
        for name in ("boxed", "plain"):
            described = server.wait_status(name, {"Completed", "Failed"})
            assert "Status: Completed" in described, described
        boxed_logs = server.cli("logs", "boxed").stdout
        for rank, pod in enumerate(("boxed-master-0", "boxed-worker-0")):
            assert f"[{pod}] in-docker rank {rank}/2" in boxed_logs, boxed_logs
            assert f"[{pod}] daemon:none:none" in boxed_logs, boxed_logs
        plain_logs = server.cli("logs", "plain").stdout
        assert plain_logs.count("daemon:none:none") == 2, plain_logs
        assert "+docker" in server.cli("describe", "boxed").stdout  # its ISOLATION
        wait_until(lambda: via_docker.job_containers(f"rl-{boxed}") == [], 60, "none left")
        # A running one: exec is docker exec into its container; delete leaves nothing.
        sleeper = server.submit_dist("sleeper", work, "-i", docker_image,
                          command="echo up; exec sleep 600")  # fmt: skip
        wait_until(lambda: "up" in server.cli("logs", "sleeper").stdout, 180, "running")
        assert len(via_docker.job_containers(f"rl-{sleeper}")) == 2
        inside = server.cli("exec", "sleeper", "--pod", "worker-0", "--", "sh", "-c",
                            'test -e /.dockerenv && echo in-docker $RANK "$PWD"')  # fmt: skip
        assert (inside.returncode, inside.stdout) == (0, f"in-docker 1 {work}\n"), inside.stderr
        assert server.cli("delete", "sleeper").returncode == 0
        wait_until(lambda: via_docker.job_containers(f"rl-{sleeper}") == [], 120, "none left")
    finally:
        server.kill()
        stop_workloads(server.home)


def test_docker_pulls_an_image_only_the_cluster_registry_has_with_its_password(
    via_docker: Docker, python_image: str, tmp_path: Path, work: Path
) -> None:
    """The registry's password reaches docker its way (a private ``--config``
    directory, not podman's ``--authfile``), and only for the pull."""
    require(shutil.which("docker-registry") is not None, "docker-registry (Debian package)")
    home = tmp_path / "home"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = subprocess.run([*RL, "registry", "start", "--port", str(port), "--data-dir",
                              str(home)], capture_output=True, text=True, timeout=120,
                             check=False)  # fmt: skip
    assert started.returncode == 0, started.stderr
    target = f"127.0.0.1:{port}/ringleader-test/debian-python:bookworm"
    server = ServerProcess(home, "--container-runtime", "docker")
    try:
        pushed = server.cli("image", "push", python_image)
        assert pushed.returncode == 0 and f"pushed: {target}" in pushed.stdout, pushed.stderr
        assert via_docker("image", "inspect", target).returncode != 0  # docker lacks it
        anonymous = via_docker("pull", target)
        assert anonymous.returncode != 0 and "no basic auth credentials" in anonymous.stderr
        server.start()
        server.submit_dist("pulled", work, "-i", target,
                           command=IN_DOCKER)  # fmt: skip
        described = server.wait_status("pulled", {"Completed", "Failed"})
        assert "Status: Completed" in described, described
        assert "Pulled" in described, described
        pulled = server.event_messages("pulled", "Pulled")
        assert len(pulled) == 1 and re.search(r"pulled image \S+ in [0-9.]+ s", pulled[0]), pulled
        assert "in-docker rank 0/2" in server.cli("logs", "pulled").stdout
        held = via_docker("images", "--format", "{{.Repository}}").stdout.split()
        assert target.rsplit(":", 1)[0] in held, held  # by the digest the tag named
        assert not list(home.rglob("config.json")), "the password's file outlived the pull"
    finally:
        server.kill()
        stop_workloads(home)
        subprocess.run([*RL, "registry", "stop", "--data-dir", str(home)], capture_output=True,
                       timeout=120, check=False)  # fmt: skip
        # By its names (an ID would untag the session's image of the same layers too).
        for image in via_docker(
            "images", "--digests", "--format", "{{.Repository}}@{{.Digest}}"
        ).stdout.split():
            if image.startswith(target.rsplit(":", 1)[0] + "@"):
                via_docker("rmi", image)
