"""A pod's environment: the allow-listed part of the server's, never its settings or
secrets (README "Pod environment"); through a real server process, and the backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ringleader.launch.detached import SUPERVISOR_ENV, scoped_environ
from ringleader.server.backends.local import LocalBackend
from tests.conftest import wait_until
from tests.helpers.local_backend import make_request, wait_final
from tests.server.conftest import ServerProcess, stop_workloads

SERVER_ONLY = {
    "RINGLEADER_TEST_SECRET_XYZ": "1",
    "AWS_SECRET_ACCESS_KEY": "x",
    "RINGLEADER_DATABASE_URL": "postgresql+psycopg://rl:s3cret@db/rl",
    "RINGLEADER_SSH_CONFIG": "/nonexistent/ssh_config",
    "RINGLEADER_MAX_LOG_BYTES": "65536",
}
PRINT_ENV = "python3 -c \"import json, os; print('ENV', json.dumps(dict(os.environ)))\""


def printed_env(lines: list[str]) -> dict[str, str]:
    found = [json.loads(line[4:]) for line in lines if line.startswith("ENV ")]
    assert len(found) == 2  # a master's and a worker's
    return found[0]


def test_scoped_environ_keeps_only_the_allow_list() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "LANG": "C",
        "RINGLEADER_HOME": "/srv/rl",
        "RINGLEADER_URL": "http://127.0.0.1:1",
        "RINGLEADER_JOB_ID": "rl-other",
        "SSH_AUTH_SOCK": "/tmp/agent",
        **SERVER_ONLY,
    }
    assert scoped_environ(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "LANG": "C",
        "RINGLEADER_SSH_CONFIG": "/nonexistent/ssh_config",  # the supervisor's; see below
        "RINGLEADER_MAX_LOG_BYTES": "65536",  # its log cap, likewise
    }
    assert set(SUPERVISOR_ENV) == {"RINGLEADER_SSH_CONFIG", "RINGLEADER_MAX_LOG_BYTES"}


def test_a_rank_sees_no_server_setting_even_the_supervisors_own(tmp_path) -> None:
    import os

    backend = LocalBackend(grace_s=1.0, environ={**os.environ, **SERVER_ONLY})
    request = make_request(
        tmp_path / "run",
        workers=1,
        command=PRINT_ENV,
        environmentVariables=[{"name": "MINE", "value": "spec"}],
    )
    handle = backend.start(request)
    assert wait_final(backend, handle).phase == "Completed"
    env = printed_env([ln.text for ln in backend.logs(handle) if ln.stream == "stdout"])
    assert not set(SERVER_ONLY) & set(env)
    assert env["MINE"] == "spec" and env["PATH"] and env["RANK"] in ("0", "1")
    assert "RINGLEADER_HOME" not in env and "RINGLEADER_URL" not in env


def test_a_pod_of_a_real_server_sees_neither_its_secrets_nor_its_home(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "home")
    secrets = {k: v for k, v in SERVER_ONLY.items() if k != "RINGLEADER_DATABASE_URL"}
    server.env.update(secrets)  # (the server itself needs a database it can reach)
    server.start()
    try:
        sub = server.cli("submit-dist", "pytorch", "envs", "--workers", "1", "--", *_argv())
        assert sub.returncode == 0, sub.stderr
        wait_until(lambda: "Completed" in _status(server), 90, "Completed")
        logs = server.cli("logs", "envs").stdout
        env = printed_env([re.sub(r"^\[[^]]+\] ", "", ln) for ln in logs.splitlines()])
        assert not set(secrets) & set(env)
        assert "RINGLEADER_HOME" not in env
        # Only what the server gives on purpose: its URL and the submitter's pod token.
        assert env["RINGLEADER_URL"] == server.url and env["RINGLEADER_TOKEN"]
        assert str(server.home) not in env.values()  # the run dir below it is the pod's
    finally:
        server.kill()
        stop_workloads(server.home)


def _argv() -> list[str]:
    return ["python3", "-c", "import json, os; print('ENV', json.dumps(dict(os.environ)))"]


def _status(server: ServerProcess) -> str:
    match = re.search(r"Status: (\w+)", server.cli("describe", "envs").stdout)
    return match.group(1) if match else ""
