"""Host-path volumes in image pods (issue 24, items 1 and 5): ``-v SRC:DST[:ro]``,
``--host-path path=,mount=[,readwrite]`` and ``spec.storage.hostPath``, mounted as
the pod's account opened them, within the server's allow-list
(``--host-path-allow``), checked as written at submission and as resolved on the host.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.cli.submit_options import SubmitOptions
from ringleader.errors import InvalidSpec
from tests.conftest import wait_until
from tests.fixtures.images import job_containers, python_image, staged_mounts
from tests.server.conftest import ServerProcess, running_server

__all__ = ["python_image"]  # the fixture, used by name


# ----- the flags (pure) --------------------------------------------------------------
def _options(**given: object) -> SubmitOptions:
    flags = {"volume": "-v", "host_path": "--host-path"}
    return SubmitOptions(workers=1, flags=flags, name="v", image="img:1", **given)  # type: ignore[arg-type]


def test_both_flag_forms_become_runais_host_path_volumes() -> None:
    spec = _options(volume=["/data:/in:ro", "/scratch:/out"],
                    host_path=["path=/models,mount=/m", "path=/w,mount=/w,readwrite"]).spec("p")  # fmt: skip
    storage = spec.spec.storage
    assert storage is not None and storage.host_path is not None
    got = [(v.path, v.mount_path, v.read_only) for v in storage.host_path]
    # -v: read-write unless :ro (Docker's rule); --host-path: read-only unless readwrite (Run:ai's)
    assert got == [("/data", "/in", True), ("/scratch", "/out", False),
                   ("/models", "/m", True), ("/w", "/w", False)]  # fmt: skip


@pytest.mark.parametrize(
    ("given", "flag", "says"),
    [
        ({"volume": ["/data"]}, "-v", "expected SRC:DST"),
        ({"volume": ["/a:/b:rx"]}, "-v", "expected SRC:DST"),
        ({"volume": ["data:/in"]}, "-v", "not an absolute path"),
        ({"volume": ["/data/../etc:/in"]}, "-v", "not a normal path"),
        ({"volume": ["/data:/proc/x"]}, "-v", "the container's own"),
        ({"host_path": ["path=/a"]}, "--host-path", "needs path=SRC and mount=DST"),
        ({"host_path": ["path=/a,mount=/b,rw"]}, "--host-path", "unknown part 'rw'"),
    ],
)
def test_a_bad_volume_names_its_flag(given: dict[str, list[str]], flag: str, says: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        _options(**given).spec("p")
    assert caught.value.where == flag and says in caught.value.problem, caught.value


# ----- a real server -------------------------------------------------------------------
@pytest.fixture
def dirs() -> Iterator[Path]:
    """Directories every account can enter: ``allowed/`` (with a file and a link out of
    it), ``other/`` (outside the allow-list), ``work/``."""
    top = Path(tempfile.mkdtemp(prefix="rl-vol-", dir="/var/tmp"))
    top.chmod(0o755)
    for name in ("allowed", "other", "work"):
        (top / name).mkdir(mode=0o755)
    (top / "allowed" / "data.txt").write_text("from the host\n")
    (top / "other" / "secret.txt").write_text("not yours\n")
    (top / "allowed" / "out").symlink_to(top / "other")
    yield top
    shutil.rmtree(top, ignore_errors=True)


def _status(server: ServerProcess, name: str, timeout: float = 180) -> str:
    def status() -> str | None:
        text = server.cli("describe", name).stdout
        found = re.search(r"Status:\s+(\w+)", text)
        return text if found and found.group(1) in ("Completed", "Failed") else None

    return str(wait_until(status, timeout, f"{name} to end"))


def test_volumes_mount_read_only_or_read_write_within_the_allow_list(
    python_image: str, tmp_path: Path, dirs: Path
) -> None:
    allowed, other, work = dirs / "allowed", dirs / "other", dirs / "work"
    probe = ("cat /in/data.txt; touch /in/new 2>/dev/null || echo read-only; "
             "echo written > /rw/made; echo DONE")  # fmt: skip
    with running_server(tmp_path / "home", "--host-path-allow", str(allowed)) as server:
        done = server.cli("submit-dist", "pytorch", "vols", "--workers", "1", "-i", python_image,
                          "-v", f"{allowed}:/in:ro", "--host-path", f"path={allowed},mount=/rw,readwrite",
                          "--command", "--", "sh", "-c", probe, cwd=str(work))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "Status: Completed" in _status(server, "vols")
        logs = server.cli("logs", "vols").stdout
        for pod in ("vols-master-0", "vols-worker-0"):
            assert f"[{pod}] from the host" in logs and f"[{pod}] read-only" in logs, logs
        assert (allowed / "made").read_text() == "written\n"  # the read-write one is the host's
        assert not (allowed / "new").exists()
        # Outside the list, as written: refused at submission naming the flag, nothing made.
        refused = server.cli("submit-dist", "pytorch", "out", "--workers", "1", "-i",
                             python_image, "-v", f"{other}:/x", "--command", "--", "true",
                             cwd=str(work))  # fmt: skip
        assert refused.returncode == 2 and "error: -v:" in refused.stderr, refused.stderr
        assert f"not under a directory this server lets pods mount (allowed: {allowed}" in (
            refused.stderr
        )
        # A process pod sees the host as it is: a volume there is refused, saying why.
        plain = server.cli("submit-dist", "pytorch", "plain", "--workers", "1", "-v",
                           f"{allowed}:/in", "--", "true", cwd=str(work))  # fmt: skip
        assert plain.returncode == 2 and "run in an image" in plain.stderr, plain.stderr
        listed = server.cli("list").stdout
        assert "out" not in listed.split() and "plain" not in listed.split()
        # Inside the list as written, out of it as resolved (a link): the gang fails on
        # the host before any rank, with no restart, and nothing of it is left.
        linked = server.cli("submit-dist", "pytorch", "linked", "--workers", "1", "-i",
                            python_image, "-v", f"{allowed}/out:/x", "--command", "--", "cat",
                            "/x/secret.txt", cwd=str(work))  # fmt: skip
        assert linked.returncode == 0, linked.stderr
        described = _status(server, "linked")
        assert "Status: Failed" in described, described
        assert f"is {other}, not under a directory this server lets pods mount" in described
        assert "Restart" not in described
        assert "not yours" not in server.cli("logs", "linked").stdout
        workload = re.search(r"Id:\s+(\S+)", described)
        assert workload is not None
        assert not job_containers(f"rl-{workload.group(1)}")
        assert not staged_mounts(f"rl-{workload.group(1)}")


@pytest.mark.parametrize(
    ("given", "says"),
    [("data", "not an absolute path"), ("/no/such/dir", "is not a directory here")],
)
def test_a_bad_allow_list_entry_stops_the_server_naming_the_flag(
    tmp_path: Path, given: str, says: str
) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ringleader", "server", "--data-dir", str(tmp_path / "h"),
         "--port", "0", "--run-as", "server", "--host-path-allow", given],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "error: --host-path-allow: " in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_masters_and_the_workers_host_paths_are_all_checked_and_mounted() -> None:
    from ringleader.server import host_paths
    from ringleader.spec import WorkloadSpec

    def spec(master: list[dict[str, object]], workers: list[dict[str, object]]) -> WorkloadSpec:
        return WorkloadSpec.model_validate({
            "name": "v", "projectId": "p", "masterSpecSameAsWorker": False,
            "masterSpec": {"command": "true", "storage": {"hostPath": master}},
            "spec": {"command": "true", "numWorkers": 1, "storage": {"hostPath": workers}},
        })  # fmt: skip

    data = {"path": "/data", "mountPath": "/in"}
    both = spec([data], [data, {"path": "/srv/w", "mountPath": "/w", "readOnly": False}])
    assert host_paths.planned(both) == [["/data", "/in", True], ["/srv/w", "/w", False]]
    with pytest.raises(InvalidSpec) as caught:  # the workers' own, outside the list
        host_paths.check(spec([data], [{"path": "/etc", "mountPath": "/x"}]), ("/data",), True)
    assert caught.value.where == "spec.storage.hostPath[0].path"
    with pytest.raises(InvalidSpec) as caught:  # one mount path, two directories
        host_paths.check(spec([data], [{"path": "/data/b", "mountPath": "/in"}]), ("/",), True)
    assert caught.value.where == "masterSpec.storage.hostPath[0].mountPath"
    assert "two host paths are mounted at /in" in caught.value.problem
