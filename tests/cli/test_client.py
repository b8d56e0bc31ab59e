"""The typed client's pure parts: HTTP errors back to typed errors, the submit options'
spec, and which server a home's commands go to (``connection.server_url``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ringleader.cli.submit_options import SubmitOptions
from ringleader.client_errors import error_for
from ringleader.connection import LOCAL_URL, server_url
from ringleader.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InvalidSpec,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
)
from ringleader.spec import Framework


@pytest.mark.parametrize(
    ("status", "kind", "exit_code"),
    [
        (401, Unauthorized, 6),
        (403, Forbidden, 6),
        (404, NotFound, 4),
        (409, Conflict, 5),
        (413, PayloadTooLarge, 2),
        (429, TooManyRequests, 8),
    ],
)
def test_each_status_comes_back_as_its_typed_error(
    status: int, kind: type[Exception], exit_code: int
) -> None:
    response = httpx.Response(status, json={"code": status, "message": "what the server said"})
    error = error_for(response)
    assert type(error) is kind
    assert str(error) == "what the server said"
    assert error.status == status and error.exit_code == exit_code


def test_a_fastapi_422_names_the_field() -> None:
    detail = [
        {"loc": ["body", "spec", "numWorkers"], "msg": "Input should be >= 1", "type": "x"},
        {"loc": ["body", "name"], "msg": "bad name", "type": "x"},
    ]
    error = error_for(httpx.Response(422, json={"detail": detail}))
    assert isinstance(error, InvalidSpec) and error.exit_code == 2
    assert error.where == "spec.numWorkers" and error.problem == "Input should be >= 1"
    assert error.fields == [("spec.numWorkers", "Input should be >= 1"), ("name", "bad name")]
    assert str(error) == "spec.numWorkers: Input should be >= 1; name: bad name"


def test_any_other_status_is_an_api_error_with_it() -> None:
    error = error_for(httpx.Response(502, text="bad gateway"))
    assert type(error) is ApiError and error.status == 502
    assert str(error) == "HTTP 502: bad gateway"


def _options(**given: object) -> SubmitOptions:
    flags = {"name": "NAME", "workers": "--workers", "env": "--environment", "gpu": "--gpu"}
    return SubmitOptions(**{"name": "job", "workers": 1, "command": [], "flags": flags, **given})


def test_v1_and_v2_flags_build_the_same_compute_block() -> None:
    v1 = _options(gpu=0.5, memory="1G", command=["python", "-c", "print(1)"]).spec("team-a")
    v2 = _options(
        gpu_devices_request=1,
        gpu_request_type="portion",
        gpu_portion_request=0.5,
        cpu_memory_request="1G",
        command=["python", "-c", "print(1)"],
    ).spec("team-a")
    assert v1.spec.compute == v2.spec.compute and v1.spec.compute.gpus == 0.5
    assert v1.project_id == "team-a" and v1.spec.command == "python -c 'print(1)'"
    assert _options(framework="mpi").spec(None).framework == Framework.MPI


@pytest.mark.parametrize(
    ("given", "where"),
    [
        ({"workers": 0}, "--workers"),
        ({"name": "Bad_Name"}, "NAME"),
        ({"env": ["NOEQUALS"]}, "--environment"),
        ({"gpu": 1.5}, "--gpu"),
        ({"framework": "caffe"}, "--framework"),
    ],
)
def test_bad_options_name_their_flag(given: dict[str, object], where: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        _options(**given).spec(None)
    assert caught.value.where == where


def test_the_flag_is_named_as_the_command_spells_it() -> None:
    options = _options(workers=0)
    options.flags["workers"] = "--processes"  # submit-mpi's name for it
    with pytest.raises(InvalidSpec, match=r"^--processes: "):
        options.spec(None)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_commands_go_to_the_recorded_server_while_it_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RINGLEADER_URL", raising=False)
    record = tmp_path / "server.json"
    assert server_url(tmp_path) == LOCAL_URL  # no record: the default
    record.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:8478"}))
    assert server_url(tmp_path) == "http://127.0.0.1:8478"
    (tmp_path / "config.json").write_text(json.dumps({"url": LOCAL_URL}))  # a local login
    assert server_url(tmp_path) == "http://127.0.0.1:8478"
    monkeypatch.setenv("RINGLEADER_URL", "http://gpu-box:8470")  # chosen on purpose: wins
    assert server_url(tmp_path) == "http://gpu-box:8470"
    monkeypatch.delenv("RINGLEADER_URL")
    record.write_text(json.dumps({"pid": _dead_pid(), "url": "http://127.0.0.1:8478"}))
    assert server_url(tmp_path) == LOCAL_URL  # a stale record is ignored


def test_wait_healthy_says_false_at_once_when_the_starting_process_exits(tmp_path: Path) -> None:
    """The one wait for a starting server (tests, benchmarks): a process that died is
    not waited for, a server that answers is seen."""
    import http.server
    import threading

    from ringleader.connection import wait_healthy
    from tests.server.conftest import free_port

    gone = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    gone.wait()
    assert not wait_healthy(f"http://127.0.0.1:{free_port()}", gone, 600)  # not 600 s

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert wait_healthy(f"http://127.0.0.1:{server.server_port}", None, 30)
    finally:
        server.shutdown()


def test_the_autostart_says_so_when_its_server_publishes_during_the_health_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A started server binds, then writes its record, then answers: a health check that
    connected before the record existed is answered after it; the start is still told."""
    from ringleader import connection
    from ringleader.home import HomeLock

    class Started:
        pid = os.getpid()  # alive, so the record it publishes is live

        def poll(self) -> None:
            return None

    checks: list[str] = []

    def healthy(url: str) -> bool:
        checks.append(url)
        if len(checks) < 3:  # before the start, and once while it starts
            return False
        lock = HomeLock.acquire(tmp_path)  # the server publishes while the check waits
        lock.publish(LOCAL_URL)
        return True

    monkeypatch.setattr(connection, "healthy", healthy)
    monkeypatch.setattr(connection, "start_local_server", lambda home: Started())
    monkeypatch.setattr(connection.time, "sleep", lambda s: None)
    assert connection.local_server(tmp_path) == LOCAL_URL
    assert f"started a server for {tmp_path} at {LOCAL_URL} (pid {os.getpid()})" in (
        capsys.readouterr().err
    )
