"""`exec`/`bash` into pods through a real server, and the exec session's terminal side."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.server.backends.base import ExecTarget
from ringleader.server.exec_session import RESIZE, STATUS, STDIN, STDOUT, ExecSession, frame
from tests.conftest import job_pids, wait_until
from tests.fixtures.terminal import Terminal
from tests.server.conftest import BASHRC_MARK, BASHRC_PATH, ServerProcess, account_home


def _running_pods(server: ServerProcess, name: str) -> int:
    out = server.cli("describe", name).stdout
    return len(re.findall(r"^\s*\S+-(?:master|worker)-\d+\s.*\bRunning\b", out, re.M))


def _workload_id(server: ServerProcess, name: str) -> str:
    out = server.cli("describe", name).stdout
    match = re.search(r"Id:\s+(\S+)", out)
    assert match, out
    return match.group(1)


@pytest.fixture
def interactive(server: ServerProcess, tmp_path: Path) -> str:
    """An interactive 2-worker workload whose pods stay up after its command (their
    account's home: ``account_home``)."""
    home = account_home(tmp_path / "account")
    sub = server.cli(
        "submit-dist", "pytorch", "dev", "--workers", "2", "--interactive",
        "-e", "GREETING=hello there", "-e", f"HOME={home}", "--", "python", "-c",
        "print('trained')",
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    wait_until(lambda: _running_pods(server, "dev") == 3, 60, "3 running pods")
    wait_until(
        lambda: server.cli("logs", "dev").stdout.count("stays up") == 3, 30, "the commands to end"
    )
    return "dev"


def test_exec_runs_in_the_pods_directory_with_its_environment(
    server: ServerProcess, interactive: str
) -> None:
    done = server.cli(
        "exec", interactive, "--", "sh", "-c",
        'echo "rank=$RANK world=$WORLD_SIZE greeting=$GREETING"; pwd; echo oops >&2; exit 7',
    )  # fmt: skip
    assert done.returncode == 7, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "rank=0 world=3 greeting=hello there"
    assert lines[1] == os.getcwd()  # the CLI submits its own directory as workingDir
    # The command's stderr, then why the session ended, as `kubectl exec` says it.
    assert done.stderr.splitlines() == ["oops", "ringleader: command terminated with exit code 7"]
    worker = server.cli(
        "distributed", "exec", interactive, "--pod", "worker-1", "--", "printenv", "RANK"
    )
    assert (worker.returncode, worker.stdout.strip()) == (0, "2")


def test_bash_reads_a_script_from_piped_input(server: ServerProcess, interactive: str) -> None:
    shell = subprocess.run(
        [sys.executable, "-m", "ringleader", "bash", interactive, "--pod", "worker-0"],
        input="echo in-pod $RANK\nexit 4\n",
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (shell.returncode, shell.stdout.strip()) == (4, "in-pod 1"), shell.stderr


def test_bash_on_a_terminal_is_an_interactive_shell(
    server: ServerProcess, interactive: str
) -> None:
    argv = [sys.executable, "-m", "ringleader", "bash", interactive]
    with Terminal(argv, {**server.env, "TERM": "dumb"}) as shell:
        shell.expect(re.escape("(dev/master-0) "))  # the prompt names the workload and pod
        shell.expect(r"[#$] ")  # then the shell's own
        shell.type("echo product=$((6*7)) rank=$RANK; tty\n")
        shell.expect("product=42 rank=0")
        shell.expect("/dev/pts/")  # the remote side has a terminal too
        # The account's ~/.bashrc was read, and what it put in front of PATH went after
        # the pod's own PATH (so `python` there is the pod's).
        shell.type(f'echo "FROM_BASHRC=$FROM_BASHRC first=${{PATH%%:*}}"; case ":$PATH:" in '
                   f'*":{BASHRC_PATH}:"*) echo "later=$((1+1))";; esac\n')  # fmt: skip
        first = shell.expect(rf"{re.escape(BASHRC_MARK)} first=(\S+)").group(1)
        assert first != BASHRC_PATH, shell.transcript
        shell.expect("later=2")
        shell.type("exit 3\n")
        assert shell.wait(timeout=30) == 3, shell.transcript
        shell.expect("command terminated with exit code 3")


def test_exec_refusals_name_the_problem(server: ServerProcess, interactive: str) -> None:
    bad_pod = server.cli("exec", interactive, "--pod", "worker-9", "--", "true")
    assert bad_pod.returncode == 2
    assert "no such pod" in bad_pod.stderr and "dev-worker-1" in bad_pod.stderr
    missing = server.cli("exec", interactive, "--", "no-such-command-xyz")
    assert missing.returncode != 0 and "no-such-command-xyz" in missing.stderr
    assert server.cli("exec", "ghost", "--", "true").returncode == 4
    finished = server.cli(
        "submit-dist", "pytorch", "batch", "--workers", "1", "--", "python", "-c", "pass"
    )
    assert finished.returncode == 0
    wait_until(lambda: "Completed" in server.cli("describe", "batch").stdout, 60, "Completed")
    refused = server.cli("exec", "batch", "--", "true")
    assert refused.returncode == 5 and "--interactive" in refused.stderr


def _long_exec(server: ServerProcess, workload: str) -> subprocess.Popen[str]:
    """`ringleader exec` of a long command, returned once the command runs."""
    client = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ringleader",
            "exec",
            workload,
            "--",
            "sh",
            "-c",
            "echo up; exec sleep 300",
        ],
        env=server.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None and client.stdout.readline().strip() == "up"
    return client


def test_a_dropped_exec_client_leaves_no_process(server: ServerProcess, interactive: str) -> None:
    job = f"rl-{_workload_id(server, interactive)}"
    before = set(job_pids(job))
    client = _long_exec(server, interactive)
    # Read once it has settled: the shell that printed "up" is replacing itself with
    # sleep, and /proc shows no environment mid-exec.
    session = wait_until(
        lambda: set(job_pids(job)) - before, 15, "the exec'd process to carry the job id"
    )
    assert session, "the exec'd process carries the job id"
    os.kill(client.pid, signal.SIGKILL)
    client.wait()
    wait_until(lambda: not (set(job_pids(job)) & session), 15, "the exec session to be stopped")


def test_deleting_the_workload_ends_its_exec_sessions(
    server: ServerProcess, interactive: str
) -> None:
    job = f"rl-{_workload_id(server, interactive)}"
    client = _long_exec(server, interactive)
    assert server.cli("delete", interactive).returncode == 0
    assert client.wait(timeout=60) in (137, 143)  # the session ended with its pod: 128+signal
    assert client.stderr is not None
    said = client.stderr.read()
    assert re.search(r"ringleader: workload dev was deleted: the session was killed by SIG", said)
    wait_until(lambda: job_pids(job) == [], 30, "no process of the workload")


def test_suspending_the_workload_ends_its_exec_sessions_saying_so(
    server: ServerProcess, interactive: str
) -> None:
    client = _long_exec(server, interactive)
    assert server.cli("suspend", interactive).returncode == 0
    assert client.wait(timeout=60) in (137, 143)
    assert client.stderr is not None
    assert "workload dev was stopped (suspended)" in client.stderr.read()


def test_a_session_whose_server_stops_says_so(server: ServerProcess, interactive: str) -> None:
    client = _long_exec(server, interactive)
    assert server.proc is not None
    server.proc.terminate()
    assert client.wait(timeout=60) != 0
    assert client.stderr is not None
    said = client.stderr.read()
    assert f"the server at {server.url} stopped" in said and "Traceback" not in said, said
    assert said.count("\n") <= 2, said


def test_a_session_killed_inside_says_by_what(server: ServerProcess, interactive: str) -> None:
    done = server.cli("exec", interactive, "--", "sh", "-c", "kill -KILL $$")
    assert done.returncode == 137, done.stderr
    assert done.stderr.strip() == (
        "ringleader: the session was killed by SIGKILL (signal 9) (exit code 137)"
    )


def test_a_tty_session_gets_a_terminal_of_the_asked_size(tmp_path) -> None:
    target = ExecTarget(node="here", cwd=str(tmp_path), env={**os.environ, "TERM": "dumb"})
    session = ExecSession(target, ["sh", "-c", "read line; echo got:$line; stty size; tty"], True)
    session.start()
    inbound: asyncio.Queue[bytes | None] = asyncio.Queue()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    async def main() -> int | None:
        await inbound.put(frame(RESIZE, json.dumps({"rows": 33, "cols": 101}).encode()))
        await inbound.put(frame(STDIN, b"ping\n"))
        return await session.relay(send, inbound.get)

    try:
        code = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        session.stop()
    assert code == 0
    assert all(chunk[0] == STDOUT for chunk in sent)  # a terminal has one stream
    text = b"".join(chunk[1:] for chunk in sent).decode()
    assert "got:ping" in text and "33 101" in text and "/dev/pts/" in text
    assert STATUS not in {chunk[0] for chunk in sent}  # the route sends the status


# Resize frames a broken or hostile client might send; each must be ignored.
BAD_RESIZES = [
    b"",
    b"not json",
    b"\xff\xfe",
    b"[33, 101]",
    b'{"rows": 24}',
    b'{"rows": "24", "cols": 80}',
    b'{"rows": true, "cols": 80}',
    b'{"rows": 24.0, "cols": 80}',
    b'{"rows": -1, "cols": 80}',
    b'{"rows": 0, "cols": 80}',
    b'{"rows": 70000, "cols": 80}',
    b'{"rows": 100000000000000000000, "cols": 80}',
    b'{"rows": 24, "cols": 80, "pad": "' + b"x" * 5000 + b'"}',
    b"[" * 200,
]


def test_malformed_resize_frames_are_ignored_and_the_session_goes_on(
    server: ServerProcess, interactive: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ringleader.cli.exec import read_status
    from ringleader.client import Client

    monkeypatch.setenv("RINGLEADER_HOME", str(server.home))
    monkeypatch.setenv("RINGLEADER_URL", server.url)
    client = Client.connect()
    with client.exec_socket(
        _workload_id(server, interactive),
        ["sh", "-c", "read line; stty size; echo got:$line; exit 5"],
        tty=True,
    ) as ws:
        ws.send(frame(RESIZE, json.dumps({"rows": 33, "cols": 101}).encode()))
        for payload in BAD_RESIZES:  # after a good one: the size must stay 33x101
            ws.send(frame(RESIZE, payload))
        ws.send(frame(STDIN, b"ping\n"))
        text, status = b"", None
        for message in ws:
            assert isinstance(message, bytes)
            if message[0] == STATUS:
                status = read_status(message[1:])
                break
            assert message[0] == STDOUT
            text += message[1:]
    assert status == 5, text
    assert b"33 101" in text and b"got:ping" in text


def test_a_relay_that_fails_ends_with_an_error_status(tmp_path) -> None:
    target = ExecTarget(node="here", cwd=str(tmp_path), env=dict(os.environ))
    session = ExecSession(target, ["sleep", "300"], False)
    session.start()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    async def broken_receive() -> bytes | None:
        raise RuntimeError("the socket's reader broke")

    try:
        code = asyncio.run(asyncio.wait_for(session.relay(send, broken_receive), 30))
    finally:
        session.stop()
    assert code is None and session.proc is not None and session.proc.poll() is not None
    assert [chunk[0] for chunk in sent] == [STATUS]
    status = json.loads(sent[0][1:])
    assert status["code"] == 500 and "the socket's reader broke" in status["error"]


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"garbage",
        b"[0]",
        b'{"exitCode": "7"}',
        b'{"exitCode": null}',
        b'{"error": "x", "code": "4"}',
    ],
)
def test_an_unreadable_status_is_reported_not_raised_raw(payload: bytes) -> None:
    from ringleader.cli.exec import RemoteError, read_status
    from ringleader.errors import RingleaderError

    with pytest.raises(RingleaderError) as caught:
        read_status(payload)
    if payload.startswith(b'{"error"'):
        assert isinstance(caught.value, RemoteError) and str(caught.value) == "x"
    else:
        assert "unreadable status" in str(caught.value)
    assert read_status(b'{"exitCode": 7}') == 7


def test_each_malformed_resize_frame_is_counted_and_the_size_kept(tmp_path) -> None:
    target = ExecTarget(node="here", cwd=str(tmp_path), env={**os.environ, "TERM": "dumb"})
    session = ExecSession(target, ["sh", "-c", "read line; stty size"], True)
    session.start()
    inbound: asyncio.Queue[bytes | None] = asyncio.Queue()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    async def main() -> int | None:
        await inbound.put(frame(RESIZE, b'{"rows": 33, "cols": 101}'))
        for payload in BAD_RESIZES:
            await inbound.put(frame(RESIZE, payload))
        await inbound.put(frame(STDIN, b"go\n"))
        return await session.relay(send, inbound.get)

    try:
        code = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        session.stop()
    assert code == 0 and session.bad_resizes == len(BAD_RESIZES)
    assert "33 101" in b"".join(chunk[1:] for chunk in sent).decode()


def test_logs_of_a_silent_interactive_workload_say_why_they_are_empty(
    server: ServerProcess,
) -> None:
    """Seed 001's `sleep infinity` workload prints nothing: `logs` says it runs, is
    interactive, and that bash is the way in, rather than printing nothing at all."""
    sub = server.cli("submit-dist", "pytorch", "quiet", "--workers", "1", "--interactive",
                     "--", "sh", "-c", "sleep infinity")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    wait_until(lambda: _running_pods(server, "quiet") == 2, 60, "2 running pods")
    done = server.cli("logs", "quiet")
    assert done.returncode == 0 and done.stdout == "", done.stdout
    said = " ".join(done.stderr.split())
    assert "no log lines yet: quiet is Running and has printed nothing" in said, said
    assert "`ringleader bash quiet` opens a shell in it" in said, said
    assert server.cli("delete", "quiet").returncode == 0
