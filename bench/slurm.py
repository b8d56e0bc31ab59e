"""Slurm benchmark: the digits example on 2 nodes, three ways, same cluster, same run.

(a) ``srun torchrun``: the peer, a hand-written sbatch script as users write it today
    (first node's address from ``scontrol``, a port, ``srun --ntasks-per-node=1
    torchrun --nnodes $SLURM_NNODES --rdzv-backend c10d ...``), submitted with
    ``sbatch`` and polled with ``scontrol show job`` every 0.25 s to its end (the
    best case for the peer: ``sbatch --wait`` sleeps 2 s, then 8 s, between polls);
(b) ``ringleader launch --slurm -N 2 --nproc-per-node 1``, which follows the job itself;
(c) the server's Slurm backend: a running ``ringleader server --backend slurm:PARTITION``,
    ``ringleader submit-dist pytorch NAME --workers 1`` (a master and a worker: 2 nodes)
    then ``ringleader logs NAME -f`` to its end, as a user types them.  Skipped, with
    a note in the results, while ``ringleader.server.backends.slurm`` does not exist.

Measured per run, all from the moment the submitting command starts:
- submit -> first training step: the example's ``first_step_unix`` line (rank 0
  prints the wall clock after its first optimizer step; every process is on this
  machine, so one clock);
- whole job: until the submitting side knows the job has ended.
Runs alternate (a, b, c, a, b, c ...), with every node idle before each, so drift
hits all three.  The cluster is the tests' throw-away one (tests/fixtures/
slurmcluster.py: slurmctld and three slurmd on this machine, root needed).
Writes bench/results/slurm.json and bench/results/slurm.md (not with --quick).

Usage: python bench/slurm.py [--runs 5] [--epochs 5]
       python bench/slurm.py --quick
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.fixtures.slurmcluster

from tests.fixtures.slurmcluster import SlurmCluster, missing_binaries  # noqa: E402

RESULTS = REPO / "bench" / "results"
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
TARGET_RATIO = 1.10
POLL_S = 0.25
PY = sys.executable
WAYS = ("srun torchrun", "launch --slurm", "server backend")


def digits(epochs: int) -> list[str]:
    return ["-m", "ringleader.examples.digits", "--epochs", str(epochs), "--bench"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peer_script(workdir: Path, epochs: int, port: int) -> str:
    """The sbatch script a user of ``srun torchrun`` writes (the port picked free here,
    where users hard-code one)."""
    example = shlex.join(digits(epochs))
    return f"""#!/bin/bash
#SBATCH --job-name=peer
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output={workdir}/peer-%j.out
#SBATCH --chdir={workdir}
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
head_addr=$(scontrol show node "$head" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')
srun --ntasks-per-node=1 {shlex.quote(PY)} -m torch.distributed.run \\
    --nnodes "$SLURM_NNODES" --nproc-per-node 1 \\
    --rdzv-backend c10d --rdzv-endpoint "$head_addr:{port}" --rdzv-id "$SLURM_JOB_ID" \\
    {example}
"""


def scontrol_field(job_id: str, name: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(rf"(?:^| ){name}=(\S*)", out)
    return match.group(1) if match else ""


ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


def first_step(text: str, started: float, what: str) -> float:
    match = FIRST.search(text)
    if not match:
        raise RuntimeError(f"{what}: no RINGLEADER_BENCH first-step line in:\n{text[-2000:]}")
    return float(match.group(1)) - started


def run_peer(workdir: Path, epochs: int) -> dict[str, float]:
    script = peer_script(workdir, epochs, free_port())
    started = time.time()
    job_id = (
        subprocess.run(
            ["sbatch", "--parsable"], input=script, capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .split(";")[0]
    )
    while (state := scontrol_field(job_id, "JobState")) not in ENDED:
        time.sleep(POLL_S)
    ended = time.time()
    output = (workdir / f"peer-{job_id}.out").read_text(errors="replace")
    if state != "COMPLETED":
        raise RuntimeError(f"srun torchrun job {job_id} ended {state}:\n{output[-2000:]}")
    return {"first_step_s": first_step(output, started, "peer"), "wall_s": ended - started}


def run_launch_slurm(workdir: Path, epochs: int) -> dict[str, float]:
    argv = [
        PY,
        "-m",
        "ringleader",
        "launch",
        "--slurm",
        "-N",
        "2",
        "--nproc-per-node",
        "1",
        "--",
        PY,
        *digits(epochs),
    ]
    started = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=workdir, timeout=600)
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(
            f"launch --slurm exited {proc.returncode}:\n{proc.stderr[-2000:]}\n"
            f"its job's output (the ranks' lines, ringleader's root cause):\n{proc.stdout[-3000:]}"
        )
    return {
        "first_step_s": first_step(proc.stdout, started, "launch --slurm"),
        "wall_s": ended - started,
    }


class BackendServer:
    """``ringleader server --backend slurm:PARTITION`` on its own home and port."""

    def __init__(self, home: Path, partition: str) -> None:
        self.home = home
        self.port = free_port()
        self.partition = partition
        self.env = {
            **os.environ,
            "RINGLEADER_HOME": str(home),
            "RINGLEADER_URL": f"http://127.0.0.1:{self.port}",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        argv = [
            PY,
            "-m",
            "ringleader",
            "server",
            "--port",
            str(self.port),
            "--backend",
            f"slurm:{self.partition}",
            "--run-as",
            "server",  # as the other benchmarks: the venv's interpreter is root's alone here
        ]
        with open(self.home / "server-bench.log", "ab") as log:
            self.proc = subprocess.Popen(
                argv, env=self.env, stdout=log, stderr=log, start_new_session=True
            )
        from ringleader.connection import wait_healthy

        if not wait_healthy(self.env["RINGLEADER_URL"], self.proc, 60):
            log = (self.home / "server-bench.log").read_text(errors="replace")
            raise RuntimeError(f"the Slurm-backed server did not start:\n{log[-2000:]}")

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "ringleader", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_backend(server: BackendServer, epochs: int, index: int) -> dict[str, float]:
    name = f"digits-{index}"
    started = time.time()
    submitted = server.cli(
        "submit-dist", "pytorch", name, "--workers", "1", "--", "python", *digits(epochs)
    )
    if submitted.returncode != 0:
        raise RuntimeError(f"submit-dist exited {submitted.returncode}:\n{submitted.stderr}")
    logs = server.cli("logs", name, "-f")
    ended = time.time()
    if logs.returncode != 0:
        raise RuntimeError(f"logs -f exited {logs.returncode}:\n{logs.stderr[-2000:]}")
    return {
        "first_step_s": first_step(logs.stdout, started, "server backend"),
        "wall_s": ended - started,
    }


def backend_missing() -> str | None:
    """Why (c) cannot run in this tree, or None."""
    if importlib.util.find_spec("ringleader.server.backends.slurm") is None:
        return "the server's Slurm backend (ringleader.server.backends.slurm) is not in this tree"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs per way (median reported)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of the digits example")
    parser.add_argument("--quick", action="store_true", help="1 run of 1 epoch; writes nothing")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.epochs = 1, 1
    if os.geteuid() != 0 or missing_binaries():
        missing = ", ".join(missing_binaries()) or "root"
        raise SystemExit(f"needs root and Slurm (missing: {missing}; apt: slurm-wlm munge)")
    # munged's socket path must stay under 108 bytes: a deep $TMPDIR is not used
    short_tmp = tempfile.gettempdir() if len(tempfile.gettempdir()) < 40 else "/tmp"
    root = Path(tempfile.mkdtemp(prefix="rl-bench-slurm-", dir=short_tmp))
    root.chmod(0o755)
    cluster = SlurmCluster(root=root, conf=root / "slurm.conf")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    server = None
    try:
        cluster.start()
        skipped = backend_missing()
        if skipped is None:
            server = BackendServer(root / "home", cluster.partition)
            server.start()
        report = measure(args, cluster, root, server, skipped)
    finally:
        if server is not None:
            server.stop()
        cluster.cancel_all()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    table = render(report)
    print(table)
    if args.quick:
        print("--quick: nothing written")
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "slurm.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "slurm.md").write_text(table)
    return 0


def measure(
    args: argparse.Namespace,
    cluster: SlurmCluster,
    root: Path,
    server: BackendServer | None,
    skipped: str | None,
) -> dict[str, Any]:
    workdir = root / "work"
    workdir.mkdir()
    ways = {
        "srun torchrun": lambda i: run_peer(workdir, args.epochs),
        "launch --slurm": lambda i: run_launch_slurm(workdir, args.epochs),
    }
    if server is not None:
        ways["server backend"] = lambda i: run_backend(server, args.epochs, i)
    for way in ways.values():  # warm the page cache (torch's import) for every way alike
        cluster.wait_idle()
        way(0)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for i in range(1, args.runs + 1):
        for name, way in ways.items():
            cluster.wait_idle()
            sample = way(i)
            samples[name].append(sample)
            print(
                f"run {i}/{args.runs} {name:15s} first step {sample['first_step_s']:.3f}s "
                f"whole job {sample['wall_s']:.3f}s",
                flush=True,
            )
    median = {
        name: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
        for name, runs in samples.items()
    }
    peer = median["srun torchrun"]
    ratios = {
        name: {key: value / peer[key] for key, value in med.items()}
        for name, med in median.items()
        if name != "srun torchrun"
    }
    return {
        "benchmark": "slurm",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "cluster": f"slurmctld + 3 slurmd on this machine ({cluster.partition}), 2 nodes used",
        "workload": f"ringleader.examples.digits, 2 nodes x 1 rank, gloo, {args.epochs} epochs",
        "runs": args.runs,
        "median": median,
        "samples": samples,
        "ratios_vs_srun_torchrun": ratios,
        "target_ratio_max": TARGET_RATIO,
        "meets_targets": all(r <= TARGET_RATIO for way in ratios.values() for r in way.values()),
        "skipped": {"server backend": skipped} if skipped else {},
    }


def render(report: dict[str, Any]) -> str:
    med, ratios = report["median"], report["ratios_vs_srun_torchrun"]
    names = [name for name in WAYS if name in med]
    head = " | ".join(names)
    lines = [
        "# Slurm benchmark: srun torchrun vs ringleader launch --slurm vs the server's backend",
        "",
        f"{report['workload']}; {report['cluster']}; median of {report['runs']} alternating "
        f"runs each; {report['date']}; {report['machine']['cpus']} CPUs.",
        "",
        f"| metric | {head} | ratios vs srun torchrun | target |",
        "|---|" + "---|" * len(names) + "---|---|",
    ]
    for key, label in (("first_step_s", "submit -> first step (s)"), ("wall_s", "whole job (s)")):
        values = " | ".join(f"{med[name][key]:.2f}" for name in names)
        ratio = ", ".join(f"{name} {ratios[name][key]:.3f}" for name in names if name in ratios)
        lines.append(f"| {label} | {values} | {ratio} | <= {TARGET_RATIO} |")
    for name, why in report["skipped"].items():
        lines += ["", f"{name}: not measured: {why}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
