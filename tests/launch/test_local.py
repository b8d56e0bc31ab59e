"""Real launches on this machine: environment, output, log files, bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from tests.conftest import job_pids, launch

ENV_DUMP = """
import json, os
keys = [k for k in os.environ if k.startswith(("RANK", "LOCAL_", "WORLD", "GROUP", "NODE", "NNODES",
        "MASTER", "TORCHELASTIC", "RINGLEADER", "ROLE", "OMP_", "GLOO", "NCCL", "PYTHONUNBUFFERED"))]
print("ENV " + json.dumps({k: os.environ[k] for k in keys}))
"""


def _envs(stdout: str) -> dict[int, dict[str, str]]:
    envs = {}
    for line in stdout.splitlines():
        match = re.match(r"^\[(\d+)/(\d+) (\S+)\] ENV (.*)$", line)
        if match:
            envs[int(match.group(1))] = json.loads(match.group(4))
    return envs


def test_two_ranks_get_torchrun_compatible_env(script) -> None:
    proc = launch("-n", "2", "--run-id", "rl-envtest", "--", "python", script(ENV_DUMP))
    assert proc.returncode == 0, proc.stderr
    envs = _envs(proc.stdout)
    assert sorted(envs) == [0, 1]
    cores = len(os.sched_getaffinity(0))
    for rank, env in envs.items():
        assert env["RANK"] == env["RINGLEADER_RANK"] == str(rank)
        assert env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["GROUP_RANK"] == env["NODE_RANK"] == "0" and env["NNODES"] == "1"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0" and env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert env["TORCHELASTIC_RUN_ID"] == env["RINGLEADER_JOB_ID"] == "rl-envtest"
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["OMP_NUM_THREADS"] == str(max(1, cores // 2))
        assert env["GLOO_SOCKET_IFNAME"] == "lo"
        assert env["RINGLEADER_NODE_IPS"] == "127.0.0.1"
        assert env["RINGLEADER_MASTER_NODE_IP"] == "127.0.0.1"
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"attempt-0/rank-{rank}.error.json")
        assert env["RINGLEADER_HOSTFILE"].endswith("/hostfile")
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"] != "29500"
    assert "interface lo" in proc.stderr  # the banner says which interface, per host
    assert job_pids("rl-envtest") == []


def test_user_settings_win_and_e_flag_reaches_ranks(script) -> None:
    proc = launch(
        "-n",
        "2",
        "-e",
        "FOO=bar baz",
        "--",
        "python",
        script(ENV_DUMP + "\nprint('FOO=' + os.environ['FOO'])"),
        env={"OMP_NUM_THREADS": "3", "GLOO_SOCKET_IFNAME": "lo"},
    )
    assert proc.returncode == 0, proc.stderr
    assert all(e["OMP_NUM_THREADS"] == "3" for e in _envs(proc.stdout).values())
    assert proc.stdout.count("FOO=bar baz") == 2


def test_generated_hostfile_is_mpi_format(script) -> None:
    body = "import os; print('HF', open(os.environ['RINGLEADER_HOSTFILE']).read().strip())"
    proc = launch("-n", "3", "--", "python", script(body))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("HF 127.0.0.1 slots=3") == 3


PIECES = """
import os, sys, time
rank = int(os.environ["RANK"])
letter = "AB"[rank]
for i in range(30):
    for ch in letter * 40:          # one character per write: worst case for mixing
        sys.stdout.write(ch); sys.stdout.flush()
    sys.stdout.write("\\n"); sys.stdout.flush()
print(f"to-stderr-{rank}", file=sys.stderr)
sys.stdout.write(f"no-newline-at-end-{rank}")
"""


def test_lines_never_mix_and_streams_stay_apart(script) -> None:
    proc = launch("-n", "2", "--", "python", script(PIECES))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out.count("[0/2 localhost] " + "A" * 40) == 30
    assert out.count("[1/2 localhost] " + "B" * 40) == 30
    assert "[0/2 localhost] no-newline-at-end-0" in out
    assert "[1/2 localhost] no-newline-at-end-1" in out
    assert len(out) == 62
    assert "to-stderr" not in proc.stdout
    assert "[1/2 localhost] to-stderr-1" in proc.stderr.splitlines()


def test_ranks_filter_no_prefix_and_log_dir(script, tmp_path: Path) -> None:
    body = "import os, sys; print('out', os.environ['RANK']); print('err', os.environ['RANK'], file=sys.stderr)"
    logs = tmp_path / "logs"
    proc = launch(
        "-n",
        "3",
        "--ranks",
        "0,2",
        "--no-prefix",
        "--log-dir",
        str(logs),
        "--",
        "python",
        script(body),
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["out 0", "out 2"]
    for rank in range(3):
        assert (logs / "attempt-0" / f"rank-{rank}.stdout").read_text() == f"out {rank}\n"
        assert (logs / "attempt-0" / f"rank-{rank}.stderr").read_text() == f"err {rank}\n"


def test_log_dir_has_every_ranks_files_even_for_a_silent_rank(script, tmp_path: Path) -> None:
    """As torchrun's --log-dir: a file per rank and stream from the attempt's start, so a
    reader finds each rank's (the digits example prints from rank 0 only)."""
    logs = tmp_path / "logs"
    body = "import os; print('only', os.environ['RANK']) if os.environ['RANK'] == '0' else None"
    proc = launch("-n", "3", "--log-dir", str(logs), "--", "python", script(body))
    assert proc.returncode == 0, proc.stderr
    made = sorted(p.name for p in (logs / "attempt-0").iterdir())
    assert made == [f"rank-{r}.{s}" for r in range(3) for s in ("stderr", "stdout")], made
    assert (logs / "attempt-0" / "rank-0.stdout").read_text() == "only 0\n"
    assert (logs / "attempt-0" / "rank-2.stdout").read_text() == ""


def test_log_dir_files_of_mpi_ranks_and_of_ended_attempts(
    script, tmp_path: Path, mpirun_available
) -> None:
    """mpirun's ranks get their files too (named by rank, never mpirun's own -1); the
    files of an attempt that ended are closed when the next starts (256 ranks and two
    restarts would hold 1,536 files open otherwise)."""
    from ringleader.launch.output import ConsoleSink

    logs = tmp_path / "logs"
    body = "import os; print('hi') if os.environ['OMPI_COMM_WORLD_RANK'] == '0' else None"
    proc = launch("--framework", "mpi", "-n", "2", "--log-dir", str(logs), "--",
                  "python", script(body))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    made = sorted(p.name for p in (logs / "attempt-0").iterdir())
    assert made == [f"rank-{r}.{s}" for r in range(2) for s in ("stderr", "stdout")], made

    sink = ConsoleSink(log_dir=tmp_path / "unit")
    sink.attempt_started(0, [0, 1])
    first = list(sink._files.values())
    sink.attempt_started(1, [0, 1])
    assert all(handle.closed for handle in first) and len(sink._files) == 4
    sink.close()


def test_two_launches_at_once_get_different_ports(script, tmp_path: Path) -> None:
    import subprocess
    import sys

    body = "import os, time; print('PORT', os.environ['MASTER_PORT']); time.sleep(0.5)"
    path = script(body)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ringleader",
                "launch",
                "-n",
                "2",
                "--no-prefix",
                "--",
                "python",
                path,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    ports = [set(o.split()) - {"PORT"} for o in outs]
    assert all(len(p) == 1 for p in ports)
    assert ports[0] != ports[1]


def test_bad_hostfile_exits_2_naming_file_and_line(tmp_path: Path, script) -> None:
    marker = tmp_path / "started"
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=2\nlocalhost slots=two\n")
    proc = launch(
        "--hostfile", str(hostfile), "--", "python", script(f"open({str(marker)!r}, 'w')")
    )
    assert proc.returncode == 2
    assert f"{hostfile}:2: slots must be a positive integer" in proc.stderr
    assert not marker.exists()


def test_missing_command_and_bad_flags_exit_2() -> None:
    proc = launch("-n", "2")
    assert proc.returncode == 2 and "no command given" in proc.stderr
    proc = launch("-n", "2", "--framework", "tensorflow", "--", "true")
    assert proc.returncode == 2 and "--framework" in proc.stderr
    proc = launch("-n", "2", "-e", "NOEQUALS", "--", "true")
    assert proc.returncode == 2 and "-e/--env" in proc.stderr


def test_command_not_found_is_a_rank_failure() -> None:
    proc = launch("-n", "2", "--", "/nonexistent/trainer")
    assert proc.returncode == 127
    assert "cannot start '/nonexistent/trainer'" in proc.stderr


def test_local_names_in_a_hostfile_run_without_ssh(script, tmp_path: Path) -> None:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=2\n127.0.0.1 slots=1\n")
    # An ssh that only leaves a trace: if the launcher used ssh for local names, we'd see it.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(f"#!/bin/sh\ntouch {tmp_path}/ssh-was-used\nexit 255\n")
    (bindir / "ssh").chmod(0o755)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    proc = launch("--hostfile", str(hostfile), "--", "python", script(ENV_DUMP), env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "ssh-was-used").exists()
    envs = _envs(proc.stdout)
    assert [envs[r]["NODE_RANK"] for r in range(3)] == ["0", "0", "1"]
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"127.0.0.1"}


def test_the_loopback_master_is_found_without_asking_ip() -> None:
    from ringleader.launch import netif

    assert netif.local_addresses().get("127.0.0.1") == "lo"  # what `ip addr` says
    assert netif.interface_toward("127.0.0.1") == ("lo", "127.0.0.1")
    assert netif.interface_toward("localhost") == ("lo", "127.0.0.1")
