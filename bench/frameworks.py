"""Frameworks under ringleader against each one's own way of starting, same run (issue 25).

For TensorFlow, JAX, XGBoost and Horovod, the digits example of each
(``examples/*_digits.py``) on 2 processes of this machine, started two ways, alternating:

(a) ``ringleader launch -n 2 --framework NAME -- python -m ...``;
(b) the peer: for Horovod its own launcher, ``horovodrun --gloo -np 2`` (Horovod's,
    kept as ``horovodrun-upstream`` in ``make horovod``'s environment); for the rest
    by hand, as a user without a launcher would: two processes with the framework's
    own names written out (TensorFlow: a ``TF_CONFIG`` per process naming two free
    ports; JAX: ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
    ``JAX_PROCESS_ID``; XGBoost: Kubeflow's ``MASTER_ADDR``/``MASTER_PORT``/
    ``WORLD_SIZE``/``RANK``, the master running XGBoost's tracker).

Figures: time to first step (the command's start to the end of rank 0's first
training step, printed by ``--bench``) and the whole job (the command's wall time).
Target: ringleader <= 1.10x the peer on each.  Horovod's runs use the Python of
``make horovod`` (``$RINGLEADER_HOROVOD_VENV``, default ``.horovod``).

Writes bench/results/frameworks.json and frameworks.md (not with --quick, a smoke run).

Usage: python bench/frameworks.py [--runs 5]
       python bench/frameworks.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
TARGET_RATIO = 1.10
PY = sys.executable
# framework -> (example module, its arguments: the same work both ways)
PROGRAMS = {
    "tf": ("ringleader.examples.tf_digits", ["--steps", "300"]),
    "jax": ("ringleader.examples.jax_digits", ["--steps", "300"]),
    "xgboost": ("ringleader.examples.xgboost_digits", ["--rounds", "30"]),
    "horovod": ("ringleader.examples.horovod_digits", ["--steps", "300"]),
}
HOROVOD_VENV = Path(
    os.environ.get("RINGLEADER_HOROVOD_VENV") or Path(__file__).resolve().parent.parent / ".horovod"
)
PEERS = {"horovod": "horovodrun --gloo"}  # the rest: started by hand


def _python(framework: str) -> str:
    """The interpreter that has the framework (Horovod has its own environment)."""
    return str(HOROVOD_VENV / "bin" / "python") if framework == "horovod" else PY


def _ports(count: int) -> list[int]:
    """Ports free now on 127.0.0.1 (the hand-started run's own pick)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def by_hand_env(framework: str, rank: int, ports: list[int]) -> dict[str, str]:
    """What a user writes out for ``rank`` of 2 without a launcher, plus the thread count
    ringleader gives each of 2 ranks (cores // 2): the comparison is of the launchers,
    not of two processes each taking every core."""
    threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // 2))}
    return {**threads, **_names(framework, rank, ports)}


def _names(framework: str, rank: int, ports: list[int]) -> dict[str, str]:
    if framework == "tf":
        cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
        task = {"type": "chief", "index": 0} if rank == 0 else {"type": "worker", "index": 0}
        return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": task})}
    if framework == "jax":
        return {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{ports[0]}", "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": str(rank)}  # fmt: skip
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ports[0]), "WORLD_SIZE": "2",
            "RANK": str(rank)}  # fmt: skip


def run_once(framework: str, how: str, extra: list[str]) -> dict[str, float]:
    """One run: seconds to rank 0's first step, and the whole job's."""
    module, args = PROGRAMS[framework]
    program = [_python(framework), "-m", module, *args, *extra, "--bench"]
    started = time.time()
    if how == "by_hand" and framework == "horovod":  # Horovod's own launcher, Gloo mode
        threads = {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // 2))}  # as ours
        upstream = str(HOROVOD_VENV / "bin" / "horovodrun-upstream")
        done = subprocess.run([upstream, "--gloo", "-np", "2", "-H", "localhost:2", *program],
                              env={**os.environ, **threads}, capture_output=True, text=True,
                              timeout=600, check=False)  # fmt: skip
        outputs, codes = [done.stdout], [done.returncode]
    elif how == "ringleader":
        launch = [PY, "-m", "ringleader", "launch", "-n", "2", "--framework", framework]
        done = subprocess.run([*launch, "--", *program], capture_output=True, text=True,
                              timeout=600, check=False)  # fmt: skip
        outputs, codes = [done.stdout + (done.stderr if done.returncode else "")], [done.returncode]
    else:
        outputs, codes = by_hand(framework, program)
    ended = time.time()
    found = FIRST.search("".join(outputs))
    if any(codes) or found is None:
        raise SystemExit(f"{framework} by {how} failed ({codes}):\n{''.join(outputs)[-2000:]}")
    return {"first_step_s": float(found.group(1)) - started, "whole_job_s": ended - started}


def by_hand(framework: str, program: list[str], tries: int = 3) -> tuple[list[str], list[int]]:
    """Two processes started as a user would, each one's output and exit code.

    The ports are picked free and then closed, so another process may take one before
    a rank binds it; the rank that cannot bind fails and its peer would wait for it
    forever (TensorFlow and JAX do).  So the first rank to fail ends the other, and a
    run whose ranks failed is tried again on fresh ports (up to ``tries``), with their
    stderr in the error when none succeeds."""
    for _ in range(tries):
        with tempfile.TemporaryFile("w+") as err0, tempfile.TemporaryFile("w+") as err1:
            errs, ports = [err0, err1], _ports(2)
            procs = [
                subprocess.Popen(program, env={**os.environ, **by_hand_env(framework, r, ports)},
                                 stdout=subprocess.PIPE, stderr=errs[r], text=True)
                for r in range(2)
            ]  # fmt: skip
            outputs = _outputs_failing_fast(procs)
            codes = [p.returncode for p in procs]
            if not any(codes):
                return outputs, codes
            for e in errs:
                e.seek(0)
            stderr = "".join(e.read()[-1500:] for e in errs)
    raise SystemExit(f"{framework} by hand failed {tries} times ({codes}):\n{stderr}")


def _outputs_failing_fast(procs: list[subprocess.Popen[str]], limit_s: float = 600) -> list[str]:
    """Each process's stdout once all have ended; the first that fails ends the rest."""
    chunks: list[list[str]] = [[] for _ in procs]
    readers = [
        threading.Thread(target=lambda p=p, c=c: c.extend(p.stdout or []), daemon=True)
        for p, c in zip(procs, chunks, strict=True)
    ]
    for r in readers:
        r.start()
    deadline = time.monotonic() + limit_s
    while any(p.poll() is None for p in procs):
        failed = any(p.returncode not in (None, 0) for p in procs)
        if failed or time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.05)
    for r in readers:
        r.join()
    return ["".join(c) for c in chunks]


def measure(runs: int, extra: list[str], frameworks: list[str]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for framework in frameworks:
        samples: dict[str, list[dict[str, float]]] = {"ringleader": [], "by_hand": []}
        for i in range(runs):
            for how in samples:
                samples[how].append(run_once(framework, how, extra))
            print(f"{framework} run {i + 1}/{runs}: " + ", ".join(
                f"{how} {s[-1]['first_step_s']:.2f}/{s[-1]['whole_job_s']:.2f} s"
                for how, s in samples.items()), flush=True)  # fmt: skip
        row: dict[str, Any] = {}
        for metric in ("first_step_s", "whole_job_s"):
            med = {how: statistics.median(s[metric] for s in got) for how, got in samples.items()}
            row[metric] = {**med, "ratio": med["ringleader"] / med["by_hand"]}
        table[framework] = row
    return table


def markdown(table: dict[str, Any], runs: int) -> str:
    lines = [
        f"Medians of {runs} alternating runs, 2 processes on this machine "
        f"({platform.node()}, {os.cpu_count()} cores); target ringleader <= "
        f"{TARGET_RATIO:.2f}x the peer.",
        "",
        "| framework | metric | ringleader (s) | peer | peer (s) | ratio | target met |",
        "|---|---|---|---|---|---|---|",
    ]
    for framework, row in table.items():
        for metric, label in (("first_step_s", "to first step"), ("whole_job_s", "whole job")):
            r = row[metric]
            lines.append(
                f"| {framework} | {label} | {r['ringleader']:.2f} | "
                f"{PEERS.get(framework, 'by hand')} | {r['by_hand']:.2f} | "
                f"{r['ratio']:.2f}x | {'yes' if r['ratio'] <= TARGET_RATIO else 'no'} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--frameworks", default=",".join(PROGRAMS))
    parser.add_argument("--quick", action="store_true", help="1 short run each; nothing written")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    extra = ["--steps", "5"] if args.quick else []
    names = args.frameworks.split(",")
    if args.quick:  # xgboost's flag is --rounds: the same count, its own word
        PROGRAMS["xgboost"] = ("ringleader.examples.xgboost_digits", ["--rounds", "5"])
        PROGRAMS["tf"] = ("ringleader.examples.tf_digits", ["--steps", "5"])
        PROGRAMS["jax"] = ("ringleader.examples.jax_digits", ["--steps", "5"])
        PROGRAMS["horovod"] = ("ringleader.examples.horovod_digits", ["--steps", "5"])
        extra = []
    table = measure(runs, extra, names)
    text = markdown(table, runs)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        record = {"runs": runs, "target_ratio": TARGET_RATIO, "frameworks": table}
        (RESULTS / "frameworks.json").write_text(json.dumps(record, indent=2) + "\n")
        (RESULTS / "frameworks.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
