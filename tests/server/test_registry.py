"""The cluster's registry (issue 24, item 2): a real ``docker-registry`` started by
``ringleader registry start``, an image pushed with ``ringleader image push``, a
workload whose image exists only there pulled by the agent with the registry's
password, and a tenant (no password) who can neither pull nor push over it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ringleader.cli.images import pushed_name
from tests.conftest import require, wait_until
from tests.fixtures.images import podman, python_image
from tests.server.conftest import ServerProcess, running_server

__all__ = ["python_image"]  # the fixture, used by name


def test_a_pushed_name_keeps_path_and_tag_in_the_registry() -> None:
    at = "127.0.0.1:5000"
    assert pushed_name("localhost/team/train:1", at) == f"{at}/team/train:1"
    assert pushed_name("team/train", at) == f"{at}/team/train:latest"
    assert pushed_name("quay.io/a/b@sha256:" + "0" * 64, at) == f"{at}/a/b@sha256:" + "0" * 64
    assert pushed_name("registry:5000/x:2", at) == f"{at}/x:2"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args, "--data-dir", str(home)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_an_image_only_in_the_registry_runs_and_no_one_without_its_password_uses_it(
    python_image: str, tmp_path: Path
) -> None:
    require(shutil.which("docker-registry") is not None, "docker-registry (Debian package)")
    home, port = tmp_path / "home", _free_port()
    address = f"127.0.0.1:{port}"
    done = _cli(home, "registry", "start", "--port", str(port))
    assert done.returncode == 0 and f"registry started at {address}" in done.stdout, done.stderr
    try:
        again = _cli(home, "registry", "start", "--port", str(port))
        assert f"registry already runs at {address}" in again.stdout, again.stderr
        assert (home / "registry" / "auth.json").stat().st_mode & 0o077 == 0
        empty = _cli(home, "image", "ls")
        assert "holds no image yet" in empty.stdout, empty.stderr
        pushed = _cli(home, "image", "push", python_image)
        target = f"{address}/ringleader-test/debian-python:bookworm"
        assert pushed.returncode == 0 and f"pushed: {target}" in pushed.stdout, pushed.stderr
        podman("rmi", "--force", target)
        # Another image (one file), pushed, then gone from here: only the registry has it.
        made = subprocess.run("cd /etc && tar -cf - hostname | podman import - "
                              "localhost/rl-other:1", shell=True, capture_output=True,
                              text=True, check=False)  # fmt: skip
        assert made.returncode == 0, made.stderr
        assert _cli(home, "image", "push", "localhost/rl-other:1").returncode == 0
        podman("rmi", "--ignore", "--force", "localhost/rl-other:1", f"{address}/rl-other:1")
        assert podman("image", "exists", "localhost/rl-other:1").returncode == 1
        # ON THIS NODE: the image the tag names in the registry (by its ID, whatever
        # its names here) is here: the one pushed from here is; the other is not.
        listed = _cli(home, "image", "ls").stdout
        assert re.search(
            rf"{re.escape(address)}/ringleader-test/debian-python\s+bookworm\s+yes", listed
        ), listed
        assert re.search(rf"{re.escape(address)}/rl-other\s+1\s+no", listed), listed
        # Without the password: neither a pull nor a push over it.
        anonymous = podman("pull", "--tls-verify=false", target)
        assert anonymous.returncode != 0 and "unauthorized" in anonymous.stderr.lower()
        with tempfile.TemporaryDirectory() as empty_auth:
            Path(empty_auth, "none.json").write_text('{"auths": {}}')
            over = podman("push", "--tls-verify=false", "--authfile", f"{empty_auth}/none.json",
                          python_image, target)  # fmt: skip
        assert over.returncode != 0 and "unauthorized" in over.stderr.lower(), over.stderr
        # The server's agent pulls it with the registry's password (Always: this node
        # holds the same image), then runs it.
        with running_server(home) as server:
            _submit(server, "reg", target, "echo from-registry", tmp_path, "Always")
            described = _ended(server, "reg")
            assert "Status: Completed" in described, described
            # Its pull is in its history: Kubernetes' Pulled, with the time and size.
            assert "Pulled" in described, described
            pulled = server.event_messages("reg", "Pulled")
            assert len(pulled) == 1 and re.fullmatch(
                r"localhost: pulled image \S+ in [0-9.]+ s \(\d+ MB\)", pulled[0]
            ), pulled
            assert "[reg-master-0] from-registry" in server.cli("logs", "reg").stdout
            # The registry goes away: a workload whose image is there waits, saying why,
            # and runs once the registry is back (a wait, not a failure).
            podman("rmi", "--force", target)
            assert _cli(home, "registry", "stop").stdout.strip() == "registry stopped"
            _submit(server, "later", target, "echo back", tmp_path)

            def waiting() -> str | None:
                text = server.cli("describe", "later").stdout
                return text if "which does not answer" in text else None

            held = str(wait_until(waiting, 60, "later to wait for the registry"))
            assert "Status: Pending" in held and "ImageUnavailable" in held, held
            restarted = _cli(home, "registry", "start", "--port", str(port))
            assert restarted.returncode == 0, restarted.stderr

            described = _ended(server, "later")
            assert "Status: Completed" in described, described
        assert re.search(r"bookworm\s+yes", _cli(home, "image", "ls").stdout)
        missing = _cli(home, "image", "push", "localhost/not/here:1")
        assert missing.returncode != 0 and "no image localhost/not/here:1 here" in missing.stderr
        assert "Traceback" not in missing.stderr
    finally:
        stopped = _cli(home, "registry", "stop")
        podman("rmi", "--force", f"{address}/ringleader-test/debian-python:bookworm")
    assert stopped.stdout.strip() == "registry stopped", stopped.stderr
    status = _cli(home, "registry", "status")
    assert status.returncode == 3 and "no registry runs" in status.stdout
    pushed_late = _cli(home, "image", "push", python_image)
    assert pushed_late.returncode != 0 and "ringleader registry start" in pushed_late.stderr


def _submit(
    server: ServerProcess, name: str, image: str, script: str, cwd: Path, pull: str = ""
) -> None:
    policy = ["--image-pull-policy", pull] if pull else []
    done = server.cli("submit-dist", "pytorch", name, "--workers", "1", "-i", image, *policy,
                      "--command", "--", "sh", "-c", script, cwd=str(cwd))  # fmt: skip
    assert done.returncode == 0, done.stderr


def _ended(server: ServerProcess, name: str) -> str:
    def ended() -> str | None:
        text = server.cli("describe", name).stdout
        return text if re.search(r"Status:\s+(Completed|Failed)", text) else None

    return str(wait_until(ended, 180, f"{name} to end"))


@pytest.mark.parametrize("port", ["0", "70000", "x"])
def test_a_bad_port_is_refused_naming_the_flag(tmp_path: Path, port: str) -> None:
    done = _cli(tmp_path / "home", "registry", "start", "--port", port)
    assert done.returncode == 2 and "--port" in done.stderr, done.stderr
    assert not (tmp_path / "home" / "registry").exists()


def test_the_password_goes_only_to_a_port_the_registry_process_holds(tmp_path: Path) -> None:
    """A tenant's listener on the registry's port (while it is down) is not taken for
    it: the kernel's socket table says whose the port is, and an agent refuses to
    pull from it rather than send it the password or run what it serves; nor does
    the supervisor hand the password to another host's agent."""
    from ringleader.launch import listeners, registry_pull

    def flags(container: dict, image: str) -> tuple[list[str], str]:
        with registry_pull.registry_flags(container, image, str(tmp_path)) as found:
            return found

    with socket.create_server(("127.0.0.1", 0)) as impostor:
        port = impostor.getsockname()[1]
        assert listeners.owns_port(os.getpid(), port)  # this process's socket
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            assert not listeners.owns_port(sleeper.pid, port)  # not the "registry's"
            where = tmp_path / "registry"
            where.mkdir()
            (where / "address").write_text(f"127.0.0.1:{port}\n")
            (where / "registry.pid").write_text(f"{sleeper.pid}\n")
            (where / "auth.json").write_text('{"auths": {}}')
            image = f"127.0.0.1:{port}/team/train:1"
            container = {"registry_dir": str(where), "image": image}
            found, refused = flags(container, image)
            assert found == [] and "not served by the registry's process" in refused
            other = flags(container, "quay.io/a/b:1")
            assert other == ([], "")  # another registry: nothing to do with this one
            remote = registry_pull.for_host(container, "node-1", local=False)
            assert "registry" not in remote and "registry_dir" not in remote
            assert "not served by the registry's process" in flags(remote, image)[1]
        finally:
            sleeper.kill()
            sleeper.wait()
    assert not listeners.owns_port(os.getpid(), port)  # closed: nobody listens


def test_another_hosts_agent_gets_the_password_for_its_pull_only(tmp_path: Path) -> None:
    """An SSH node has no registry directory: the supervisor checks the port on the
    head and hands the password over; the agent keeps it in a 0600 file of its
    private run directory while it pulls, then removes it. An address only the
    head reaches is refused naming the fix."""
    from ringleader.launch import registry_pull

    with socket.create_server(("0.0.0.0", 0)) as served:
        port = served.getsockname()[1]
        where = tmp_path / "registry"
        where.mkdir()
        (where / "registry.pid").write_text(f"{os.getpid()}\n")  # this process serves it
        (where / "auth.json").write_text('{"auths": {"x": {"auth": "c2VjcmV0"}}}')
        image = f"192.0.2.7:{port}/team/train:1"
        (where / "address").write_text(f"192.0.2.7:{port}\n")
        container = {"registry_dir": str(where), "image": image, "runtime": "podman"}
        assert registry_pull.for_host(container, "head", local=True) is container
        remote = registry_pull.for_host(container, "node-1", local=False)
        assert "registry_dir" not in remote and remote["runtime"] == "podman"
        assert remote["registry"]["address"] == f"192.0.2.7:{port}"
        scratch = tmp_path / "rundir"
        scratch.mkdir(mode=0o700)
        with registry_pull.registry_flags(remote, image, str(scratch)) as (flags, refused):
            assert refused == "" and flags[:2] == ["--tls-verify=false", "--authfile"]
            authfile = Path(flags[2])
            assert authfile.parent == scratch and authfile.stat().st_mode & 0o777 == 0o600
            assert "c2VjcmV0" in authfile.read_text()
        assert not authfile.exists()
        # docker's words: a private --config directory whose config.json it is.
        with registry_pull.registry_flags(remote, image, str(scratch), docker=True) as given:
            (flags, refused), folder = given, Path(given[0][1])
            assert refused == "" and flags == ["--config", str(folder)]
            assert folder.parent == scratch and folder.stat().st_mode & 0o777 == 0o700
            assert (folder / "config.json").stat().st_mode & 0o777 == 0o600
            assert "c2VjcmV0" in (folder / "config.json").read_text()
        assert not folder.exists()
        with registry_pull.registry_flags(remote, "quay.io/a/b:1", str(scratch)) as other:
            assert other == ([], "")
        (where / "address").write_text(f"127.0.0.1:{port}\n")
        image = f"127.0.0.1:{port}/team/train:1"
        loop = registry_pull.for_host({**container, "image": image}, "node-1", local=False)
        assert "node-1 cannot reach" in loop["registry_refused"]
        assert "registry start --host" in loop["registry_refused"]


def test_a_restart_never_shows_a_reader_a_registry_without_its_address_or_password(
    tmp_path: Path,
) -> None:
    """While the registry restarts, the scheduler (``Reachability``) and the agents
    (``registry_pull``) read its files: each read finds its address and password,
    so an image in it is never taken for another registry's and pulled over HTTPS
    without the password (a CI failure: the address was removed for the start)."""
    import threading

    from ringleader.launch import registry_pull
    from ringleader.server import registry

    require(shutil.which("docker-registry") is not None, "docker-registry (Debian package)")
    home, port = tmp_path / "home", _free_port()
    registry.start(home, port=port)
    where = str(registry.directory(home))
    misses: list[str] = []
    done = threading.Event()

    def read_all_the_time() -> None:
        while not done.is_set():
            if registry_pull._read(where) is None:
                misses.append("registry_pull")
            if not registry.Reachability(home).address:
                misses.append("Reachability")

    reader = threading.Thread(target=read_all_the_time)
    reader.start()
    try:
        assert registry.stop(home)
        restarted = registry.start(home, port=port)
        assert restarted.address == f"127.0.0.1:{port}"
    finally:
        done.set()
        reader.join()
        registry.stop(home)
    assert not misses, sorted(set(misses))
