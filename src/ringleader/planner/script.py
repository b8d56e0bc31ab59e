"""``plan --script``: the model and its compute per step, learnt from a real run.

Why run the user's script rather than ask for a factory: the script is what
trains, with its own data loading, batch and model; a factory timed on random
inputs can miss all of that. The script runs as a world of one rank, with the
environment ``ringleader launch -n 1`` gives a rank (``launch.plan.rank_env``),
in a process group of its own. The runtime tells the planner what it needs:

* ``runtime.prepare()`` writes the wrapped model's parameter shapes and dtype to
  the file named by ``RINGLEADER_PLAN_PROBE`` (``runtime.dist``);
* ``runtime.report()`` appends one record per call to ``RINGLEADER_METRICS_FILE``
  (``runtime.metrics``); the wall time between consecutive records over the
  steps between them is the step time, all of it compute in a world of one.

Once ``WARMUP + steps + 1`` records (``steps`` intervals) are in, the time is up
or the script ended, its process group is stopped (SIGTERM, then SIGKILL after a
grace) and any process still carrying the run's ``RINGLEADER_JOB_ID``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ringleader.errors import InvalidSpec, RingleaderError

WARMUP = 2  # records left out: the first steps pay for allocation and DDP's buckets
POLL_S = 0.05
GRACE_S = 5.0
TAIL_LINES = 20


class ScriptFailed(RingleaderError):
    """The script ended with an error before the planner had what it needs (exit 1)."""


@dataclass(frozen=True)
class Learnt:
    """What one rank's run taught: the model's trainable parameters and its step."""

    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    dtype_bytes: int
    step_s: float  # median wall time per step after the warm-up, less DDP's wait
    steps: int  # steps timed
    samples: int | None  # median samples per step, when report() counted them

    @property
    def params(self) -> int:
        return sum(math.prod(shape) for shape in self.shapes)


def rank_environment(run_id: str, folder: str) -> dict[str, str]:
    """The environment ``ringleader launch -n 1`` gives its one rank (launch's own
    ``rank_env``), plus the planner's probe and metrics file."""
    from ringleader.hosts import Host
    from ringleader.launch.netif import free_port
    from ringleader.launch.plan import METRICS_DIR, LaunchSpec, rank_env, teardown
    from ringleader.runtime.modes import GRAD_COMPRESSION_ENV, SYNC_EVERY_ENV

    spec = LaunchSpec(command=[], hosts=[Host("localhost", "127.0.0.1", 1)], run_id=run_id,
                      cwd=os.getcwd(), python=sys.executable)  # fmt: skip
    env = rank_env(spec, rank=0, local_rank=0, node_rank=0, attempt=0,
                   master_addr="127.0.0.1", master_port=free_port(),
                   error_file=os.path.join(folder, "rank-0.error.json"),
                   hostfile_path=os.path.join(folder, "hostfile"))  # fmt: skip
    env.pop(teardown.ENDED_FILE, None)  # nobody watches for it here
    from ringleader.runtime.dist import PLAN_PROBE

    env[PLAN_PROBE] = os.path.join(folder, "probe.json")
    env["RINGLEADER_METRICS_FILE"] = os.path.join(folder, "metrics.jsonl")
    merged = {k: v for k, v in os.environ.items() if k != METRICS_DIR}
    for name in (GRAD_COMPRESSION_ENV, SYNC_EVERY_ENV):
        merged.pop(name, None)  # the probe run trains exact DDP; plan predicts modes
    return merged | env


def _records(path: str) -> list[dict[str, object]]:
    """The complete JSON lines written so far (a half-written last line is skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "step" in record and "time" in record:
                found.append(record)
    return found


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = deque(file, TAIL_LINES)
    except OSError:
        return ""
    return "".join(lines).rstrip()


def learn(
    script: str, args: list[str], steps: int, timeout_s: float, module: bool = False
) -> Learnt:
    """Run ``script`` (a file, or with ``module`` a module run as ``python -m``) as one
    rank until ``WARMUP + steps + 1`` reports (or ``timeout_s``), stop it, and return
    what the runtime wrote. ``InvalidSpec`` naming ``--script`` (``--module``) for one
    that does not use the runtime; ``ScriptFailed`` for one that crashed."""
    from ringleader.launch import procs

    flag = "--module" if module else "--script"
    if module:
        check_module(script)
        program = ["-m", script]
    elif not Path(script).is_file():
        raise InvalidSpec(f"{script!r}: no such file", "--script")
    else:
        program = [script]
    run_id = f"plan-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="ringleader-plan-") as folder:
        env = rank_environment(run_id, folder)
        probe, metrics = env["RINGLEADER_PLAN_PROBE"], env["RINGLEADER_METRICS_FILE"]
        errors = os.path.join(folder, "stderr")
        with open(errors, "wb") as stderr:
            child = subprocess.Popen(
                [sys.executable, *program, *args], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        try:
            while child.poll() is None and time.monotonic() < deadline:
                if os.path.exists(probe) and len(_records(metrics)) > WARMUP + steps:
                    break
                time.sleep(POLL_S)
        finally:
            procs.terminate([child.pid], GRACE_S, marker=f"RINGLEADER_JOB_ID={run_id}")
            child.wait()
        records = _records(metrics)
        timed_out = child.returncode is not None and time.monotonic() >= deadline
        if (
            child.returncode not in (0, None)
            and not (os.path.exists(probe) and len(records) > WARMUP + steps)
            and not timed_out
        ):
            raise ScriptFailed(f"{script} exited with status {child.returncode} before"
                               f" {WARMUP + steps + 1} steps were reported; its last"
                               f" lines:\n{_tail(errors)}")  # fmt: skip
        return _learnt(script, probe, records, steps, timeout_s, flag)


def check_module(name: str) -> None:
    """InvalidSpec naming --module unless ``python -m name`` would find it (here, with
    this directory first on the path, as ``python -m`` has it)."""
    import importlib.util

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise InvalidSpec(f"{name!r}: {exc}", "--module") from None
    if found is None:
        raise InvalidSpec(f"no module {name!r} here (python -m would not find it)", "--module")


def _learnt(
    script: str, probe: str, records: list[dict[str, object]], steps: int, timeout_s: float,
    flag: str = "--script",
) -> Learnt:  # fmt: skip
    if not os.path.exists(probe):
        raise InvalidSpec(f"{script} never called ringleader.runtime.prepare(model) (within"
                          f" {timeout_s:g}s): the planner learns the model's parameters"
                          " there", flag)  # fmt: skip
    body = json.loads(Path(probe).read_text(encoding="utf-8"))
    if not body["shapes"]:
        raise InvalidSpec(f"{script}: the prepared model has no trainable parameters",
                          flag)  # fmt: skip
    if len(records) < WARMUP + 2:
        raise InvalidSpec(f"{script} reported {len(records)} step(s) with"
                          f" ringleader.runtime.report(step, ...) (within {timeout_s:g}s);"
                          f" the planner times steps after {WARMUP} to warm up and needs"
                          " at least 2 more", flag)  # fmt: skip
    timed = records[WARMUP:][: steps + 1]
    per_step = []
    for before, after in itertools.pairwise(timed):
        apart = int(after["step"]) - int(before["step"])  # type: ignore[call-overload]
        if apart > 0:
            per_step.append((float(after["time"]) - float(before["time"])) / apart)  # type: ignore[arg-type]
    if not per_step:
        raise InvalidSpec(f"{script}: report()'s step numbers never increase", flag)
    counted = [int(r["samples"]) for r in timed if isinstance(r.get("samples"), int)]
    # The wait for DDP's (one-rank) all-reduce, if the runtime timed any: not compute.
    waited = [float(r["comm"]) for r in timed[1:] if isinstance(r.get("comm"), int | float)]  # type: ignore[arg-type]
    step_s = statistics.median(per_step)
    if waited and statistics.median(waited) < step_s:
        step_s -= statistics.median(waited)
    return Learnt(
        shapes=tuple(tuple(s) for s in body["shapes"]), dtype=str(body["dtype"]),
        dtype_bytes=int(body["dtype_bytes"]), step_s=step_s,
        steps=len(per_step), samples=round(statistics.median(counted)) if counted else None,
    )  # fmt: skip
