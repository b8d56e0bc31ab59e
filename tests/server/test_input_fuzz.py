"""Random strings into every free-text field of a submission and of POST /nodes:
never a 5xx, and every list and workload answers 200 afterwards.

Strings are printable and not (control characters, NUL), lone UTF-16 surrogates
(sent as JSON's ``\\ud800`` escapes, as a hostile client would), quotes and
backslashes, and sizes just under, at and over each field's bound. The seed
is fixed, so a failure replays.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ringleader.spec_limits import (
    MAX_COMMAND_CHARS,
    MAX_ENV_NAME_CHARS,
    MAX_ENV_VALUE_CHARS,
    MAX_ID_CHARS,
    MAX_IMAGE_CHARS,
    MAX_PATH_CHARS,
)
from tests.server.conftest import API
from tests.server.quiet import quiet_api

SEED = 20261123
ROUNDS = 20  # per field


@pytest.fixture
def api(tmp_path: Path) -> Iterator[API]:
    yield from quiet_api(tmp_path)


def random_text(rng: random.Random, bound: int) -> str:
    """One hostile string, sized around ``bound``."""
    kind = rng.choice(["printable", "control", "unicode", "surrogate", "quotes", "sized"])
    length = rng.randint(0, 40)
    if kind == "printable":
        return "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(length))
    if kind == "control":
        return "".join(chr(rng.randint(0, 0x1F)) for _ in range(length))
    if kind == "unicode":
        return "".join(chr(rng.choice([rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
                       for _ in range(length))  # fmt: skip
    if kind == "surrogate":
        head = "".join(chr(rng.randint(0x61, 0x7A)) for _ in range(length))
        return head + chr(rng.randint(0xD800, 0xDFFF)) + head
    if kind == "quotes":
        return "".join(
            rng.choice(["'", '"', "\\", " ", "a", "\n", "\x00", "="]) for _ in range(length)
        )
    size = bound + rng.choice([-1, 0, 1])  # at the field's bound
    return rng.choice(["a", "é", " ", "\\\\"])[0] * max(size, 0)


def dumps(body: dict[str, Any]) -> bytes:
    """JSON as a client sends it: ensure_ascii writes a lone surrogate as ``\\udXXX``."""
    return json.dumps(body, ensure_ascii=True).encode()


def submission(project: str, rng: random.Random) -> dict[str, Any]:
    return {
        "name": f"w{rng.randrange(10**9)}",
        "projectId": project,
        "spec": {"command": "python train.py", "numWorkers": 1},
    }


def at(path: tuple[Any, ...], value: str) -> Callable[[dict[str, Any]], None]:
    """Sets ``value`` at ``path`` in a body, making the dicts and lists on the way."""

    def put(body: dict[str, Any]) -> None:
        node: Any = body
        for key, nxt in itertools.pairwise(path):
            if isinstance(node, list):
                while len(node) <= key:
                    node.append({} if not isinstance(nxt, int) else [])
                node = node[key]
            else:
                node = node.setdefault(key, [] if isinstance(nxt, int) else {})
        if isinstance(node, list):
            while len(node) <= path[-1]:
                node.append(None)
        node[path[-1]] = value

    return put


SUBMIT_FIELDS: list[tuple[tuple[Any, ...], int]] = [
    (("name",), 63),
    (("projectId",), MAX_ID_CHARS),
    (("clusterId",), MAX_ID_CHARS),
    (("spec", "command"), MAX_COMMAND_CHARS),
    (("spec", "args"), MAX_COMMAND_CHARS),
    (("spec", "image"), MAX_IMAGE_CHARS),
    (("spec", "workingDir"), MAX_PATH_CHARS),
    (("spec", "priorityClass"), MAX_ID_CHARS),
    (("spec", "nodePools", 0), MAX_ID_CHARS),
    (("spec", "environmentVariables", 0, "name"), MAX_ENV_NAME_CHARS),
    (("spec", "environmentVariables", 0, "value"), MAX_ENV_VALUE_CHARS),
    (("spec", "compute", "cpuMemoryRequest"), 64),
    (("spec", "compute", "gpuMemoryLimit"), 64),
    (("spec", "distributedFramework"), 16),
    (("spec", "cleanPodPolicy"), 16),
    # Run:ai's fields ringleader stores but ignores (runai_fields.py)
    (("spec", "sshAuthMountPath"), 4_096),
    (("spec", "category"), 255),
    (("spec", "labels", 0, "value"), 4_096),
    (("spec", "storage", "pvc", 0, "claimName"), 4_096),
    (("spec", "environmentVariables", 0, "description"), 4_096),
    (("masterSpec", "annotations", 0, "name"), 255),
    (("masterSpec", "command"), MAX_COMMAND_CHARS),
    (("masterSpec", "environmentVariables", 0, "value"), MAX_ENV_VALUE_CHARS),
]

NODE_FIELDS: list[tuple[tuple[Any, ...], int]] = [
    (("ssh",), 255),
    (("name",), 255),
    (("address",), 255),
    (("pool",), 63),
    (("labels", "rack"), 255),
]


def test_no_string_in_any_field_gives_a_5xx(api: API) -> None:
    rng = random.Random(SEED)
    project = api.project_id()
    statuses: dict[int, int] = {}

    def post(path: str, body: dict[str, Any]) -> None:
        answer = api.post(path, content=dumps(body), headers={"Content-Type": "application/json"})
        assert answer.status_code < 500, (path, body, answer.text[:500])
        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

    for path, bound in SUBMIT_FIELDS:
        for _ in range(ROUNDS):
            body = submission(project, rng)
            if path[0] == "masterSpec":
                body["masterSpecSameAsWorker"] = False
            at(path, random_text(rng, bound))(body)
            post("/api/v1/workloads/distributed", body)
    for path, bound in NODE_FIELDS:
        for _ in range(ROUNDS):
            body = {"ssh": f"gpu{rng.randrange(10**6)}"}
            at(path, random_text(rng, bound))(body)
            post("/api/v1/nodes", body)
    # A label's key is free text too.
    for _ in range(ROUNDS):
        post("/api/v1/nodes", {"ssh": "gpu-x", "labels": {random_text(rng, 63): "v"}})

    assert statuses.get(202) and statuses.get(422)  # both kinds were tried
    for view in ("summary", "full"):
        listed = api.get("/api/v1/workloads", params={"view": view, "limit": 500})
        assert listed.status_code == 200, listed.text[:500]
        for w in listed.json()["workloads"]:
            assert api.get(f"/api/v1/workloads/{w['workloadId']}").status_code == 200
    assert api.get("/api/v1/workloads/count").status_code == 200
    assert api.get("/api/v1/nodes").status_code == 200
