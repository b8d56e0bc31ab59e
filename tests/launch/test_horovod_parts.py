"""The Horovod framework's parts without Horovod: its environment contract, the Gloo
rendezvous store (Horovod's HTTP protocol), the root-cause rule for its "has been shut
down" consequence, and ``horovodrun``'s command line (its errors above all)."""

from __future__ import annotations

import http.client
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.launch import horovodrun
from ringleader.launch.frameworks import RankPlace
from ringleader.launch.frameworks.horovod import horovod_env
from ringleader.launch.horovod_store import serve
from ringleader.launch.mpi import launches_itself


def _place(rank: int, local: int, node: int, slots: tuple[int, ...]) -> RankPlace:
    return RankPlace(rank=rank, local_rank=local, node_rank=node, world_size=sum(slots),
                     local_world_size=slots[node], nnodes=len(slots), master_addr="10.0.0.1",
                     master_port=29500, host=f"h{node}", interface="eth0",
                     slots=slots)  # fmt: skip


def test_the_env_is_horovodruns_gloo_contract_with_uneven_slots() -> None:
    """h0 has 2 slots, h1 one: local rank 1 exists on h0 alone (its cross size is 1)."""
    second = horovod_env(_place(1, 1, 0, (2, 1)))
    assert second == {
        "HOROVOD_RANK": "1", "HOROVOD_SIZE": "3", "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_HOSTNAME": "h0", "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "29500",
        "HOROVOD_GLOO_IFACE": "eth0",
    }  # fmt: skip
    third = horovod_env(_place(2, 0, 1, (2, 1)))
    assert (third["HOROVOD_CROSS_RANK"], third["HOROVOD_CROSS_SIZE"]) == ("1", "2")
    assert (third["HOROVOD_LOCAL_SIZE"], third["HOROVOD_HOSTNAME"]) == ("1", "h1")


def _ask(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_the_store_speaks_horovods_http_protocol() -> None:
    store = serve("127.0.0.1", 0)
    port = store.server_address[1]
    try:
        assert _ask(port, "GET", "/global/rank_0") == (404, b"")  # not yet: the rank polls
        assert _ask(port, "PUT", "/global/rank_0", b"\x00addr") == (200, b"")
        assert _ask(port, "GET", "/global/rank_0") == (200, b"\x00addr")
        assert _ask(port, "GET", "/local_h0/rank_0") == (404, b"")  # scopes are apart
        assert _ask(port, "DELETE", "/global/rank_0") == (200, b"")
        assert _ask(port, "GET", "/global/rank_0")[0] == 404
        assert _ask(port, "GET", "/too/many/parts")[0] == 400
    finally:
        store.close()
    with pytest.raises(OSError):
        _ask(port, "GET", "/global/rank_0")  # closed: the port is free again


CONSEQUENCE = """
import os, sys, time
if os.environ["RANK"] == "0":
    print("Horovod has been shut down. This was caused by an exception on one of the ranks",
          file=sys.stderr, flush=True)
    sys.exit(1)
time.sleep(1)
print("rank 1: disk full", file=sys.stderr, flush=True)
sys.exit(3)
"""


def test_a_rank_told_that_horovod_shut_down_is_not_the_root_cause(tmp_path: Path) -> None:
    """Rank 0 fails first, saying a peer ended; rank 1, the cause, fails a second later:
    the gang waits for it (PEER_REPORT_S) and names it."""
    (tmp_path / "c.py").write_text(CONSEQUENCE)
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", "launch", "-n", "2", "--framework", "horovod",
         "--", "python", "c.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "rank      : 1" in done.stderr and "disk full" in done.stderr, done.stderr


# ----- horovodrun's command line --------------------------------------------------------
def _parse(*argv: str, environ: dict[str, str] | None = None) -> horovodrun.Request:
    return horovodrun.parse(list(argv), environ or {})


def _refused(*argv: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(horovodrun.Usage) as refused:
        _parse(*argv, environ=environ)
    return str(refused.value)


def test_np_takes_the_first_slots_and_gloo_is_a_launch() -> None:
    request = _parse("-np", "3", "-H", "localhost:2,127.0.0.1:2", "python", "train.py", "--lr", "1")
    assert request.mode == "gloo" and request.command == ["python", "train.py", "--lr", "1"]
    assert [(h.name, h.slots) for h in request.hosts] == [("localhost", 2), ("127.0.0.1", 1)]
    argv = horovodrun.launch_argv(request, "/py", path="")
    assert argv[:8] == ["/py", "-m", "ringleader", "launch", "--framework", "horovod", "-H",
                        "localhost:2,127.0.0.1:1"]  # fmt: skip
    assert "HOROVOD_GLOO_TIMEOUT_SECONDS=30" in argv
    assert argv[argv.index("--") :] == ["--", "python", "train.py", "--lr", "1"]
    alone = _parse("-np", "2", "--start-timeout", "90", "python", "t.py")
    assert [(h.name, h.slots) for h in alone.hosts] == [("localhost", 2)]
    assert alone.start_timeout_s == 90


def test_bad_command_lines_name_what_to_fix(tmp_path: Path) -> None:
    assert "-np is required" in _refused("python", "t.py")
    assert "-np 0: at least 1" in _refused("-np", "0", "python", "t.py")
    assert "unknown option '--bogus'" in _refused("-np", "2", "--bogus", "python", "t.py")
    assert "no command" in _refused("-np", "2")
    assert "-np 5: the hosts have 2 slot(s) (localhost:2)" in _refused(
        "-np", "5", "-H", "localhost:2", "python", "t.py"
    )
    assert "--start-timeout 0" in _refused("-np", "1", "--start-timeout", "0", "python", "t.py")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=1\n# the second machine\nno-such-host-zz slots=2\n")
    said = _refused("-np", "2", "--hostfile", str(hostfile), "python", "t.py")
    assert said == f"{hostfile}:3: unknown host 'no-such-host-zz': neither ssh nor DNS knows it"
    hostfile.write_text("localhost slots=x\n")
    assert f"{hostfile}:1" in _refused("-np", "2", "--hostfile", str(hostfile), "python", "t.py")
    assert "-H item 2" in _refused("-np", "2", "-H", "localhost:1,:x", "python", "t.py")
    missing = _refused("-np", "1", "--hostfile", str(tmp_path / "nope"), "python", "t.py")
    assert missing.startswith("--hostfile ") and "No such file" in missing


def test_in_a_launcher_pod_it_is_mpirun_on_the_pods_and_refuses_other_hosts(
    tmp_path: Path,
) -> None:
    pods = tmp_path / "hostfile"
    pods.write_text("10.0.0.2 slots=1\n10.0.0.3 slots=1\n")
    environ = {horovodrun.POD_HOSTFILE: str(pods), "PATH": "/bin", "RINGLEADER_POD": "x-launcher",
               "OMPI_MCA_plm_rsh_agent": "agent", "CUDA_VISIBLE_DEVICES": "0", "MY_SETTING": "1"}  # fmt: skip
    request = _parse("-np", "2", "python", "t.py", environ=environ)
    assert request.mode == "mpi" and [h.name for h in request.hosts] == ["10.0.0.2", "10.0.0.3"]
    argv = horovodrun.mpirun_argv(request, environ, as_root=False)
    assert "-H" not in argv  # the pod's hostfile is mpirun's default there
    exported = [argv[i + 1] for i, word in enumerate(argv) if word == "-x"]
    assert exported == ["MY_SETTING", "PATH"]  # never the launcher pod's own identity
    assert argv[-2:] == ["python", "t.py"] and argv[argv.index("-np") + 1] == "2"
    said = _refused("-np", "1", "-H", "10.0.0.9:1", "python", "t.py", environ=environ)
    assert said == "-H: host '10.0.0.9' is not one of this workload's (10.0.0.2, 10.0.0.3)"
    assert "use --mpi" in _refused("-np", "1", "--gloo", "python", "t.py", environ=environ)


def test_a_launcher_command_runs_in_the_launcher_pod_itself() -> None:
    assert launches_itself(["horovodrun", "-np", "2", "python", "t.py"])
    assert launches_itself(["/usr/bin/mpirun", "-np", "2", "python", "t.py"])
    assert launches_itself(["sh", "-c", "horovodrun -np $RUNAI_MPI_NUM_WORKERS python t.py"])
    assert not launches_itself(["python", "t.py"])
    joined = ["/bin/sh", "-c", 'echo $$ > cgroup; exec "$@"', "ringleader-join"]
    assert launches_itself([*joined, "sh", "-c", "horovodrun -np 2 python t.py"])
    assert not launches_itself(["sh", "-c"]) and not launches_itself(["sh", "-c", "python t.py"])


def test_hosts_from_a_host_list_keep_their_ssh_user() -> None:
    request = _parse("-np", "2", "-H", "me@localhost:2", "python", "t.py")
    assert horovodrun.host_list(request.hosts) == "me@localhost:2"
