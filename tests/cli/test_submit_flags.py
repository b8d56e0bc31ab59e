"""The submit commands as a Run:ai user types them, through a real server process.

Run:ai's two command forms (``--command=sh --args=-c ...`` and ``--command -- CMD``);
options after the command's first word belonging to the command; unknown
options refused naming them; errors naming the flag typed; the scheduling
and compute flags landing in Run:ai's spec fields; what submit says to do next.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ringleader.client import Client
from tests.server.conftest import ServerProcess, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real server for this module's submissions (each test uses its own names)."""
    with running_server(tmp_path_factory.mktemp("submit-flags") / "home") as proc:
        yield proc


def _typed(server: ServerProcess, line: str) -> subprocess.CompletedProcess[str]:
    """``line`` as a user types it in a shell, ``ringleader`` first."""
    words = shlex.split(line)
    assert words[0] == "ringleader", line
    return server.cli(*words[1:])


def _spec(server: ServerProcess, name: str) -> dict[str, Any]:
    """The stored spec (Run:ai's camelCase body) of workload ``name``."""
    creds = json.loads((server.home / "credentials.json").read_text())
    client = Client(server.url, creds["clientId"], creds["clientSecret"])
    return client.find(name).spec


def _command_words(server: ServerProcess, name: str) -> list[str]:
    """The workload's command line as ``describe`` shows it, split like a shell does."""
    described = server.cli("describe", name)
    assert described.returncode == 0, described.stderr
    line = re.search(r"^Command: (.*)$", described.stdout, re.M)
    assert line, described.stdout
    return shlex.split(line.group(1))


def _ran(server: ServerProcess, name: str) -> str:
    """The merged logs of workload ``name``, once it has ended."""
    logs = server.cli("logs", name, "-f", timeout=180)
    assert logs.returncode == 0, logs.stderr
    return logs.stdout


def test_old_command_and_args_run_as_those_words(server: ServerProcess) -> None:
    sub = _typed(
        server,
        "ringleader submit-dist pytorch oldform --workers 1 "
        """--command="sh" --args="-c" --args="echo 'two  words'; echo done" """,
    )
    assert sub.returncode == 0, sub.stderr
    out = _ran(server, "oldform")
    assert "[oldform-master-0] two  words" in out and "[oldform-worker-0] done" in out, out


def test_words_after_the_command_belong_to_it(server: ServerProcess, tmp_path: Path) -> None:
    program = "import os, sys; print('argv', sys.argv[1:], os.environ['GREETING'], os.getcwd())"
    sub = _typed(
        server,
        f"ringleader submit-dist pytorch after --workers 1 -e GREETING=hi "
        f"--working-dir {tmp_path} -g 0 python -c {shlex.quote(program)} -g 2 -e X=1 --attach",
    )
    assert sub.returncode == 0, sub.stderr
    out = _ran(server, "after")
    assert f"[after-master-0] argv ['-g', '2', '-e', 'X=1', '--attach'] hi {tmp_path}" in out, out
    spec = _spec(server, "after")["spec"]
    assert spec["compute"] == {"gpuDevicesRequest": 0}  # -g 0: no GPU; the script's -g 2 is its own
    assert spec["environmentVariables"] == [{"name": "GREETING", "value": "hi"}]
    assert "GPUs: 0 allocated of 0 requested" in server.cli("describe", "after").stdout


def test_bare_command_replaces_the_image_command_and_plain_words_are_its_args(
    server: ServerProcess,
) -> None:
    replaced = _typed(
        server,
        "ringleader submit-dist pytorch entry --workers 1 -i kubeflow/pytorch-dist-mnist:latest "
        """--command -- python -c "print('replaced')" """,
    )
    assert replaced.returncode == 0, replaced.stderr
    assert "[entry-master-0] replaced" in _ran(server, "entry")

    args = _typed(
        server, "ringleader submit-dist pytorch mnist-args --workers 1 "
        "-i kubeflow/pytorch-dist-mnist -- --epochs 1",
    )  # fmt: skip
    assert args.returncode == 0, args.stderr
    assert "what follows -- are arguments of the image's own command" in args.stderr
    words = _command_words(server, "mnist-args")
    assert words == ["python", "-m", "ringleader.examples.digits", "--epochs", "1"]
    assert server.cli("delete", "mnist-args").returncode == 0


def test_cli_v2_command_forms_and_request_flags(server: ServerProcess) -> None:
    new = _typed(
        server,
        "ringleader distributed submit v2new --framework PyTorch --workers 1 "
        "--gpu-request-type portion --gpu-portion-request 0.1 --gpu-devices-request 1 "
        """--cpu-core-request 0.5 --cpu-memory-request 100M --command -- python -c "print('v2 new')" """,
    )
    assert new.returncode == 0, new.stderr
    assert "ringleader distributed logs v2new -f" in new.stdout, new.stdout
    assert "[v2new-master-0] v2 new" in _ran(server, "v2new")
    compute = _spec(server, "v2new")["spec"]["compute"]
    assert compute == {
        "gpuDevicesRequest": 1,
        "gpuRequestType": "portion",
        "gpuPortionRequest": 0.1,
        "cpuCoreRequest": 0.5,
        "cpuMemoryRequest": "100M",
    }

    old = _typed(
        server,
        """ringleader distributed submit v2old --workers 1 --command=python --args=-c """
        """--args="print('v2 old')" """,
    )
    assert old.returncode == 0, old.stderr
    assert "[v2old-master-0] v2 old" in _ran(server, "v2old")


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("submit-mpi nope1 --processes=1 --attach -- true", "--attach"),
        (
            "submit-dist pytorch nope2 --workers 1 --ttl-after-finish 1h -- true",
            "--ttl-after-finish",
        ),
        ("submit-dist mpi nope3 -x --workers 1 -- true", "-x"),
        ("distributed submit nope4 --workers 1 -g 1 -- true", "-g"),
        ("submit-dist pytorch nope5 --workers", "--workers"),
    ],
)
def test_an_option_we_do_not_have_is_an_error_naming_it(
    server: ServerProcess, line: str, named: str
) -> None:
    refused = _typed(server, f"ringleader {line}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert named in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    name = re.search(r"nope\d", line)
    assert name
    listed = server.cli("list", "-A")
    assert listed.returncode == 0 and name.group() not in listed.stdout  # nothing half-created


@pytest.mark.parametrize(
    ("line", "flag"),
    [
        ("submit-mpi bad --processes 0 -- true", "--processes"),
        ("submit-dist mpi bad --processes=0 -- true", "--processes"),
        ("submit-dist pytorch bad --workers 1 -e 1=2 -- true", "-e"),
        ("submit-dist pytorch bad --workers 1 --environment A -- true", "--environment"),
        ("submit-dist pytorch bad --workers 1 -g 1.5 -- true", "-g"),
        ("submit-dist pytorch bad --workers 1 --gpu=-1 -- true", "--gpu"),
        ("submit-dist pytorch bad --workers 1 --memory lots -- true", "--memory"),
        ("submit-dist pytorch Bad --workers 1 -- true", "NAME"),
        ("submit-dist pytorch bad --workers 1 --priority urgent -- true", "--priority"),
        (
            "distributed submit bad --workers 1 --gpu-portion-request 2 -- true",
            "--gpu-portion-request",
        ),
        # refused by the server (no image reference): still named by the flag typed
        ("submit-dist pytorch bad --workers 1 -i My/Own:image -- true", "-i"),
        ("submit-dist pytorch bad --workers 1 --image kubeflow/mnist@sha256:1", "--image"),
    ],
)
def test_field_errors_name_the_flag_typed(server: ServerProcess, line: str, flag: str) -> None:
    refused = _typed(server, f"ringleader {line}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"error: {flag}: "), refused.stderr
    for api_word in ("spec.", "numWorkers", "Value error", "Traceback"):
        assert api_word not in refused.stderr, refused.stderr


def test_scheduling_and_compute_flags_have_runai_meaning(server: ServerProcess) -> None:
    sub = _typed(
        server,
        "ringleader submit-dist pytorch sched --workers 1 --interactive --preemptible "
        '--node-pools "default gpu-a" --node-pools gpu-b --cpu 0.5 --cpu-limit 1 '
        "--memory 100M --memory-limit 1G --backoff-limit 2 --gpu-memory 2G -- true",
    )
    assert sub.returncode == 0, sub.stderr
    spec = _spec(server, "sched")["spec"]
    assert spec["preemptibility"] == "preemptible"
    assert spec["priorityClass"] == "interactive-preemptible"  # Run:ai's: 75, may be reclaimed
    assert spec["nodePools"] == ["default", "gpu-a", "gpu-b"]
    assert spec["backoffLimit"] == 2 and spec["interactive"] is True
    assert spec["compute"] == {
        "cpuCoreRequest": 0.5,
        "cpuCoreLimit": 1.0,
        "cpuMemoryRequest": "100M",
        "cpuMemoryLimit": "1G",
        "gpuDevicesRequest": 1,
        "gpuRequestType": "memory",
        "gpuMemoryRequest": "2G",
    }
    assert server.cli("delete", "sched").returncode == 0

    build = _typed(server, "ringleader submit-dist mpi prio --workers 1 --priority build -- true")
    assert build.returncode == 0, build.stderr
    assert _spec(server, "prio")["spec"]["priorityClass"] == "build"


def test_name_prefix_in_both_forms(server: ServerProcess) -> None:
    runai = _typed(server, "ringleader submit-dist pytorch --name-prefix exp --workers 1 -- true")
    assert runai.returncode == 0, runai.stderr
    name = re.search(r"The workload '(exp-[0-9a-f]{6})' has been submitted", runai.stdout)
    assert name, runai.stdout
    assert f"ringleader logs {name.group(1)} -f" in runai.stdout

    bare = _typed(server, "ringleader submit-dist pytorch digits --name-prefix --workers 1 -- true")
    assert bare.returncode == 0, bare.stderr
    assert re.search(r"'digits-[0-9a-f]{6}' has been submitted", bare.stdout), bare.stdout

    both = _typed(server, "ringleader submit-dist pytorch x --name-prefix exp --workers 1 -- true")
    assert both.returncode == 2 and both.stderr.startswith("error: --name-prefix: "), both.stderr
