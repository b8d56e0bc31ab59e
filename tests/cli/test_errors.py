"""Every CLI error is one or two lines that say what to do, with its kind's exit code.

Issue 13 item 3: ``RINGLEADER_URL=http://127.0.0.1:8489 ringleader list`` printed
a ~100-line traceback, and so did every command that talks to a server.  Each
such command is run here against a port where nothing listens (and the test
fails when a new command is neither listed here nor known not to need a server).
"""

from __future__ import annotations

import http.server
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ringleader.cli.common import reports_errors
from ringleader.errors import ServerUnreachable
from tests.cli.conftest import home_env, run_cli
from tests.server.conftest import ServerProcess, free_port

# Every command that talks to a server, with arguments that get it that far.
SERVER_COMMANDS: dict[tuple[str, ...], list[str]] = {
    ("list",): [],
    ("describe",): ["x"],
    ("get",): ["x"],
    ("logs",): ["x"],
    ("delete",): ["x"],
    ("suspend",): ["x"],
    ("resume",): ["x"],
    ("exec",): ["x", "--", "true"],
    ("bash",): ["x"],
    ("whoami",): [],
    ("token",): [],
    ("login",): ["--client-id", "rl-x", "--client-secret", "y"],
    ("submit-mpi",): ["x", "--processes", "1", "--", "true"],
    ("submit-dist", "pytorch"): ["x", "--workers", "1", "--", "true"],
    ("submit-dist", "mpi"): ["x", "--workers", "1", "--", "true"],
    ("distributed", "submit"): ["x", "--workers", "1", "--", "true"],
    ("distributed", "list"): [],
    ("distributed", "describe"): ["x"],
    ("distributed", "logs"): ["x"],
    ("distributed", "delete"): ["x"],
    ("distributed", "suspend"): ["x"],
    ("distributed", "resume"): ["x"],
    ("distributed", "exec"): ["x", "--", "true"],
    **{
        ("submit-dist", fw): ["x", "--workers", "1", "--", "true"]
        for fw in ("tf", "jax", "xgboost")
    },
    **{
        ("training", fw, "submit"): ["x", "--workers", "1", "--", "true"]
        for fw in ("pytorch", "mpi", "tf", "jax", "xgboost")
    },
    ("export", "kubeflow"): ["x"],
    ("training", "list"): [],
    ("training", "describe"): ["x"],
    ("training", "logs"): ["x"],
    ("training", "delete"): ["x"],
    ("training", "suspend"): ["x"],
    ("training", "resume"): ["x"],
    ("training", "exec"): ["x", "--", "true"],
    ("project", "create"): ["x"],
    ("project", "list"): [],
    ("project", "set"): ["x"],
    ("project", "members"): ["x"],
    ("config", "project"): ["x"],
    ("nodes", "list"): [],
    ("nodes", "add"): ["somehost"],
    ("nodes", "remove"): ["x"],
    ("top", "node"): [],
    ("top", "job"): [],
    ("user", "create"): ["x"],
    ("user", "list"): [],
    ("user", "update"): ["x", "--admin"],
    ("user", "delete"): ["x"],
    ("user", "assign"): ["x", "default"],
    ("user", "unassign"): ["x", "default"],
    ("user", "logout"): ["x"],
    ("access-key", "create"): ["ci-key"],
    ("access-key", "list"): [],
    ("access-key", "revoke"): ["x"],
    ("hostfile",): ["--from-nodes"],
    ("environment", "create"): ["x", "-i", "kubeflow/pytorch-dist-mnist:latest"],
    ("environment", "list"): [],
    ("environment", "describe"): ["x"],
    ("environment", "delete"): ["x"],
    ("compute", "create"): ["x", "-g", "0.5"],
    ("compute", "list"): [],
    ("compute", "describe"): ["x"],
    ("compute", "delete"): ["x"],
}
# Commands that need no server, or read a file first (``nodes import`` HOSTS).
LOCAL_COMMANDS = {
    ("launch",),
    ("horovodrun",),
    ("server",),
    ("version",),
    ("ssh-setup",),
    ("doctor",),
    ("sync",),
    ("install",),
    ("workload-python",),
    ("nodes", "import"),
    ("registry", "start"),
    ("registry", "stop"),
    ("registry", "status"),
    ("image", "push"),
    ("image", "ls"),
    ("image", "base"),
    ("image", "build"),
    ("image", "sync"),
    ("testhosts", "up"),
    ("testhosts", "down"),
    ("testhosts", "list"),
    ("testhosts", "rate"),
    ("plan",),
}


# ``training FRAMEWORK VERB``: the very commands of ``training VERB`` (cli/distributed's
# add_v1_verbs registers both), exercised there.
SAME_AS_TRAINING = {
    ("training", fw, verb)
    for fw in ("pytorch", "mpi", "tf", "jax", "xgboost")
    for verb in ("list", "describe", "logs", "delete", "suspend", "resume", "exec")
}


def leaf_commands() -> set[tuple[str, ...]]:
    """Every command path the CLI has (``project create``...), its groups walked."""
    from ringleader.cli.main import COMMANDS

    found: set[tuple[str, ...]] = set()
    stack = [((name,), entry.load(name)) for name, entry in COMMANDS.items()]
    while stack:
        path, command = stack.pop()
        children = getattr(command, "commands", None)
        if children:
            stack += [((*path, name), child) for name, child in children.items()]
        else:
            found.add(path)
    return found


def test_every_command_is_classified() -> None:
    commands = leaf_commands()
    unknown = commands - set(SERVER_COMMANDS) - LOCAL_COMMANDS - SAME_AS_TRAINING
    assert not unknown, f"add these to SERVER_COMMANDS or LOCAL_COMMANDS: {sorted(unknown)}"
    assert set(SERVER_COMMANDS) | LOCAL_COMMANDS | SAME_AS_TRAINING <= commands  # none stale


def _assert_short(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "httpx" not in stderr, stderr
    return lines


def test_every_command_names_an_unreachable_server_in_two_lines(tmp_path: Path) -> None:
    """Issue 13's own repro, for each command: the URL, and how to start or find a server."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = home_env(
        tmp_path / "home",
        RINGLEADER_URL=url,
        RINGLEADER_CLIENT_ID="rl-someone",
        RINGLEADER_CLIENT_SECRET="not-a-secret",
    )
    failures = []
    commands = sorted(SERVER_COMMANDS.items())
    with ThreadPoolExecutor(4) as pool:  # independent processes: most of each is start-up
        results = list(pool.map(lambda c: run_cli(*c[0], *c[1], env=env, timeout=60), commands))
    for (path, _args), result in zip(commands, results, strict=True):
        lines = result.stderr.strip().splitlines()
        ok = (
            result.returncode == ServerUnreachable.exit_code
            and len(lines) == 2
            and lines[0].startswith(f"error: cannot reach the ringleader server at {url}")
            and f"ringleader server --port {port}" in lines[1]
            and "Traceback" not in result.stderr
        )
        if not ok:
            failures.append(f"{' '.join(path)}: rc {result.returncode}\n{result.stderr[-600:]}")
    assert not failures, "\n\n".join(failures)


def test_without_credentials_the_missing_server_comes_first(tmp_path: Path) -> None:
    """No credentials and no server: the server is what to fix first."""
    url = f"http://127.0.0.1:{free_port()}"
    result = run_cli("list", env=home_env(tmp_path / "home", RINGLEADER_URL=url))
    lines = _assert_short(result.stderr)
    assert result.returncode == 7 and url in lines[0] and "RINGLEADER_URL" in lines[0]
    assert "unset RINGLEADER_URL" in lines[1]


def test_a_url_without_scheme_says_what_a_url_looks_like(tmp_path: Path) -> None:
    env = home_env(
        tmp_path / "home",
        RINGLEADER_URL="localhost:8470",
        RINGLEADER_CLIENT_ID="rl-someone",
        RINGLEADER_CLIENT_SECRET="x",
    )
    result = run_cli("list", env=env)
    lines = _assert_short(result.stderr)
    assert result.returncode == 7 and "http://HOST:8470" in lines[1], lines


def test_a_host_that_does_not_resolve_says_so(tmp_path: Path) -> None:
    env = home_env(
        tmp_path / "home",
        RINGLEADER_URL="http://no-such-host.invalid:8470",
        RINGLEADER_CLIENT_ID="rl-someone",
        RINGLEADER_CLIENT_SECRET="x",
    )
    result = run_cli("whoami", env=env)
    lines = _assert_short(result.stderr)
    assert result.returncode == 7 and "no-such-host.invalid" in lines[0], lines


@pytest.fixture
def not_ringleader() -> Iterator[str]:
    """Another HTTP server (Python's own), as a wrong port would find one."""
    handler = http.server.SimpleHTTPRequestHandler
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_another_http_server_is_not_taken_for_ringleader(
    tmp_path: Path, not_ringleader: str
) -> None:
    env = home_env(
        tmp_path / "home",
        RINGLEADER_URL=not_ringleader,
        RINGLEADER_CLIENT_ID="rl-someone",
        RINGLEADER_CLIENT_SECRET="x",
    )
    result = run_cli("list", env=env)
    lines = _assert_short(result.stderr)
    assert result.returncode == 7 and "no ringleader server" in lines[0], lines


def test_exit_codes_by_kind_through_a_real_server(server: ServerProcess) -> None:
    """Not found 4, conflict 5, auth 6, bad input 2: one line and a fix each."""
    env = server.env
    missing = run_cli("describe", "nosuch", env=env)
    assert missing.returncode == 4
    lines = _assert_short(missing.stderr)
    assert "'nosuch' not found" in lines[0] and "ringleader list -A" in lines[1]

    first = run_cli("submit-dist", "pytorch", "twice", "--workers", "1", "--", "sleep", "60",
                    env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    again = run_cli("submit-dist", "pytorch", "twice", "--workers", "1", "--", "true", env=env)
    assert again.returncode == 5, again.stderr
    _assert_short(again.stderr)

    secret = "s3cret-never-shown"
    wrong = run_cli(
        "list", env={**env, "RINGLEADER_CLIENT_ID": "rl-nobody", "RINGLEADER_CLIENT_SECRET": secret}
    )
    assert wrong.returncode == 6
    lines = _assert_short(wrong.stderr)
    assert "ringleader login" in lines[1] and secret not in wrong.stderr

    bad = run_cli("submit-dist", "pytorch", "Bad_Name", "--workers", "1", "--", "true", env=env)
    assert bad.returncode == 2
    _assert_short(bad.stderr)
    usage = run_cli("list", "-o", "tsv", env=env)
    assert usage.returncode == 2 and "'tsv' is not one of wide, json, yaml" in usage.stderr
    assert run_cli("delete", "twice", env=env).returncode == 0


def test_an_unforeseen_error_is_one_line_and_a_way_to_see_more(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug still ends in one line (and exit 1); RINGLEADER_DEBUG=1 shows the traceback."""
    import typer

    @reports_errors
    def broken() -> None:
        raise KeyError("spec")

    monkeypatch.delenv("RINGLEADER_DEBUG", raising=False)
    with pytest.raises(typer.Exit) as ended:
        broken()
    assert ended.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected KeyError: 'spec'") and "RINGLEADER_DEBUG=1" in err
    assert len(err.strip().splitlines()) == 2
    monkeypatch.setenv("RINGLEADER_DEBUG", "1")
    with pytest.raises(KeyError):
        broken()


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """``ringleader logs X | head``: the pipe closes early; exit 141 as a Unix filter
    does, never "unexpected BrokenPipeError ... this is a bug"."""
    script = (
        "import typer\n"
        "from ringleader.cli.common import reports_errors\n"
        "@reports_errors\n"
        "def main() -> None:\n"
        "    for i in range(100000):\n"
        "        print('line', i)\n"
        "typer.run(main)\n"
    )
    shell = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} | head -1"
    done = subprocess.run(["bash", "-c", f"{shell}; echo rc=${{PIPESTATUS[0]}} >&2"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.stdout == "line 0\n"
    assert done.stderr.strip() == "rc=141", done.stderr
