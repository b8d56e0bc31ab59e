"""prepare()'s communication modes with real processes and real gloo (2 ranks).

Exact DDP must stay exact: ``grad_compression="none"`` (and the default, which
registers the timing hook too) leaves bit-identical parameters to torch's own
DDP.  The lossy modes must still learn: the loss over each rank's data falls
below a bound.  The launcher's variables choose the mode when prepare() is
given none, and a bad one is named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ranks import rank_envs, run_all

WORKER = str(Path(__file__).with_name("comm_worker.py"))
STEPS = 40


def train(args: dict[str, Any], **env: str) -> list[dict[str, Any]]:
    """Both ranks' reports (stderr under "stderr"); fails on a rank's failure."""
    envs = rank_envs("ringleader", 2)
    for e in envs:
        e.update(env, COMM_TEST_ARGS=json.dumps({"steps": STEPS, **args}))
    out = []
    for res in run_all(WORKER, envs):
        assert res.returncode == 0, res.stderr[-3000:]
        out.append({**json.loads(res.stdout.strip().splitlines()[-1]), "stderr": res.stderr})
    return out


def test_none_and_the_default_are_bit_identical_to_torchs_ddp() -> None:
    plain = train({"mode": "plain"})
    none = train({"grad_compression": "none", "sync_every": 1})
    default = train({})
    digests = {r["digest"] for r in plain + none + default}
    assert len(digests) == 1, (plain, none, default)
    assert plain[0]["last"] < 0.5 * plain[0]["first"]  # and it learned something


@pytest.mark.parametrize(
    "args",
    [
        {"grad_compression": "bf16"},
        {"grad_compression": "fp16"},
        {"grad_compression": "powersgd:1"},
        {"grad_compression": "powersgd:2", "width": 1024},  # several buckets: gloo's order
        {"sync_every": 4, "steps": 39},
        {"sync_every": 4, "steps": 39, "optimizer": False},  # averaging through torch's global hook
    ],
    ids=["bf16", "fp16", "powersgd", "powersgd-buckets", "sync_every", "sync_every-no-optimizer"],
)
def test_lossy_modes_converge(args: dict[str, Any]) -> None:
    reports = train(args)
    for r in reports:
        assert r["last"] < 0.5 * r["first"], reports
    if "sync_every" in args:  # steps 0-38, averaged at 10, 14 .. 38: the last one too
        assert max(r["spread"] for r in reports) < 1e-6, reports
    else:  # gradients are still summed every step: the copies stay equal
        assert reports[0]["digest"] == reports[1]["digest"]


def test_the_launchers_variables_choose_the_mode_and_comm_is_recorded(tmp_path: Path) -> None:
    reports = train(
        {},
        RINGLEADER_GRAD_COMPRESSION="powersgd:1",
        RINGLEADER_METRICS_DIR=str(tmp_path),
    )
    assert "training with powersgd:1 gradient compression" in reports[0]["stderr"]
    exact = train({})
    assert reports[0]["digest"] != exact[0]["digest"]  # compressed: not the exact result
    for rank in (0, 1):
        lines = (tmp_path / f"rank-{rank}.attempt-0.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert len(records) == STEPS
        assert all(r["comm"] >= 0 for r in records), records[:3]


def test_an_argument_wins_over_the_variable() -> None:
    reports = train({"grad_compression": "none"}, RINGLEADER_GRAD_COMPRESSION="fp16")
    assert "training with" not in reports[0]["stderr"]
    assert reports[0]["digest"] == train({"mode": "plain"})[0]["digest"]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ({}, {"RINGLEADER_SYNC_EVERY": "0"}, "RINGLEADER_SYNC_EVERY: expected a whole number"),
        ({}, {"RINGLEADER_GRAD_COMPRESSION": "zip"}, "RINGLEADER_GRAD_COMPRESSION: expected"),
        ({"grad_compression": "powersgd:x"}, {}, "grad_compression: powersgd's rank"),
        ({"grad_compression": "fp16", "sync_every": 2}, {}, "sync_every: local SGD"),
    ],
)
def test_a_bad_mode_is_named_before_anything_trains(
    args: dict[str, Any], env: dict[str, str], named: str
) -> None:
    envs = rank_envs("ringleader", 2)
    for e in envs:
        e.update(env, COMM_TEST_ARGS=json.dumps(args))
    for res in run_all(WORKER, envs):
        assert res.returncode != 0
        assert f"ValueError: {named}" in res.stderr, res.stderr[-2000:]
