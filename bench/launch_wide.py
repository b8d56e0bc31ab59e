"""Launch at width: 64 ranks across 8 SSH hosts (network namespaces, each with its own
sshd: ``ringleader testhosts``' hosts), by ringleader, by OpenMPI's ``mpirun`` with the
same hostfile, and by torchrun started on each host over SSH, in one run.

The program is an all-reduce one (torch.distributed over gloo): every rank joins the
group, does one all-reduce of 1,000 floats (the first step; rank 0 prints its wall
clock), then ten more, and leaves.  Measured per launcher, alternating, ``--runs``
times: time to the first step (from the launch command's start to rank 0's print) and
the whole job (to the launch command's end).  Under mpirun the ranks read OpenMPI's
names (``OMPI_COMM_WORLD_*``) and the master's address and port given with ``-x``;
under torchrun each host's agent rendezvouses at host 0 (``--master-addr``), the way a
user types it on each node, here with one ssh per host started at once.

The machine has 2 cores for 64 ranks: every launcher waits on the same CPU, so the
figures are comparable with each other, not with real hosts.  Target (issue 27):
ringleader <= 1.0x mpirun.  Needs root (namespaces), sshd, OpenMPI and torch.

Writes bench/results/launch_wide.json and .md (not with --quick: 2 hosts x 2 ranks,
one run each, only printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO))

from ringleader.cluster.testhosts.network import TestHostNetwork  # noqa: E402

PORT = 29731
PROGRAM = """
import os, time
if "OMPI_COMM_WORLD_RANK" in os.environ:  # under mpirun: its names, as torch's
    os.environ["RANK"] = os.environ["OMPI_COMM_WORLD_RANK"]
    os.environ["WORLD_SIZE"] = os.environ["OMPI_COMM_WORLD_SIZE"]
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1000)
dist.all_reduce(t)
if dist.get_rank() == 0:
    print("FIRST", time.time(), flush=True)
for _ in range(10):
    dist.all_reduce(t)
assert t[0].item() == dist.get_world_size() ** 11
dist.destroy_process_group()
"""


def _timed(argv: list[str] | list[list[str]], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    """Run one launch (or several commands at once, for torchrun per host); its times."""
    commands = argv if isinstance(argv[0], list) else [argv]
    started = time.time()
    procs = [
        subprocess.Popen(
            c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for c in commands
    ]
    outs = [p.communicate(timeout=900) for p in procs]
    ended = time.time()
    bad = [
        (p.returncode, err[-2000:]) for p, (_, err) in zip(procs, outs, strict=True) if p.returncode
    ]
    if bad:
        raise RuntimeError(f"{commands[0][:3]} failed: {bad[0]}")
    first = [float(line.split()[-1]) for out, _ in outs for line in out.splitlines()
             if line.split() and line.split()[-2:-1] == ["FIRST"]]  # fmt: skip
    if not first:
        raise RuntimeError(f"no FIRST line from {commands[0][:3]}: {outs[0][0][-500:]}")
    return {"first_step_s": first[0] - started, "whole_job_s": ended - started}


def launchers(net: TestHostNetwork, per_host: int, work: Path) -> dict[str, object]:
    """Each launcher's command (torchrun: one per host) for the same 64-rank job."""
    hosts = [h.address for h in net.hosts]
    master = hosts[0]
    world = per_host * len(hosts)
    (work / "hosts.json").write_text(
        json.dumps([{"ssh": a, "ips": [a], "slots": per_host} for a in hosts])
    )
    (work / "hostfile").write_text("".join(f"{a} slots={per_host}\n" for a in hosts))
    py = sys.executable
    ssh = f"ssh -F {net.ssh_config}"
    mpirun = [
        "mpirun", "--allow-run-as-root", "--hostfile", "hostfile", "-np", str(world),
        "--mca", "plm_rsh_agent", ssh, "--mca", "btl_tcp_if_include", "eth0",
        "--mca", "oob_tcp_if_include", "eth0", "-x", f"MASTER_ADDR={master}",
        "-x", f"MASTER_PORT={PORT}", "-x", "GLOO_SOCKET_IFNAME=eth0", "-x", "OMP_NUM_THREADS=1",
        py, "prog.py",
    ]  # fmt: skip
    torchrun = [
        ["ssh", "-F", str(net.ssh_config), a, f"cd {shlex.quote(str(work))} && "
         f"GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 {shlex.quote(py)} -m torch.distributed.run"
         f" --nnodes {len(hosts)} --nproc-per-node {per_host} --node-rank {i}"
         f" --master-addr {master} --master-port {PORT + 1} prog.py"]
        for i, a in enumerate(hosts)
    ]  # fmt: skip
    ringleader = [py, "-m", "ringleader", "launch", "--hostfile", "hosts.json",
                  "--ssh-config", str(net.ssh_config), "--", "python", "prog.py"]  # fmt: skip
    return {"ringleader": ringleader, "mpirun": mpirun, "torchrun per host": torchrun}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2, help="runs of each launcher, alternating")
    parser.add_argument("--quick", action="store_true", help="2 hosts x 2 ranks, 1 run, no file")
    args = parser.parse_args()
    hosts, per_host, runs = (2, 2, 1) if args.quick else (args.hosts, args.per_host, args.runs)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    samples: dict[str, list[dict[str, float]]] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="launch-wide-") as tmp, TestHostNetwork(hosts) as net:
        work = Path(tmp)
        (work / "prog.py").write_text(PROGRAM)
        commands = launchers(net, per_host, work)
        for run in range(runs):
            for name, argv in commands.items():
                sample = _timed(argv, work, env)  # type: ignore[arg-type]
                samples.setdefault(name, []).append(sample)
                print(f"run {run}: {name}: {sample}", flush=True)
    medians = {
        name: {k: statistics.median(s[k] for s in got) for k in got[0]}
        for name, got in samples.items()
    }
    result = {
        "benchmark": "launch_wide",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "hosts": hosts, "ranks_per_host": per_host, "runs": runs,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "samples": samples, "medians": medians,
    }  # fmt: skip
    text = markdown(result)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "launch_wide.json").write_text(json.dumps(result, indent=1) + "\n")
        (RESULTS / "launch_wide.md").write_text(text)
    return 0


def markdown(r: dict) -> str:
    m = r["medians"]
    base = m["mpirun"]
    lines = [
        f"# Launch at width: {r['hosts'] * r['ranks_per_host']} ranks on {r['hosts']} hosts",
        "",
        f"`python bench/launch_wide.py` ({r['when']}, {r['machine']['cpus']} CPUs, medians of "
        f"{r['runs']}; an all-reduce program over gloo). Target: ringleader <= 1.0x mpirun.",
        *_load_line(r.get("load_average")),
        "",
        "| launcher | to first step (s) | ratio to mpirun | whole job (s) | ratio to mpirun |",
        "|---|---|---|---|---|",
    ]
    for name, got in m.items():
        first, whole = got["first_step_s"], got["whole_job_s"]
        lines.append(
            f"| {name} | {first:.2f} | {first / base['first_step_s']:.2f}x"
            f" | {whole:.2f} | {whole / base['whole_job_s']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def _load_line(load: dict[str, list[float]] | None) -> list[str]:
    """The load average (1, 5, 15 min) around the run: the machine is shared."""
    if not load:
        return []
    said = {k: ", ".join(f"{v:.2f}" for v in vals) for k, vals in load.items()}
    return ["", f"Load average before: {said['before']}; after: {said['after']}."]


if __name__ == "__main__":
    sys.exit(main())
