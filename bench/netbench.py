"""Network benchmark: allreduce bus bandwidth over gloo, on loopback and between
SSH hosts in network namespaces, next to this machine's memory-copy bandwidth;
and ``ringleader doctor``'s wall time for 3 hosts.

What is measured, all in one run:
- memory copy: ``dst.copy_(src)`` of a 256 MiB float32 tensor with torch
  (its threads), median of 7 after a warm-up: bytes copied per second.  A
  gloo allreduce between processes on one machine moves every byte through
  memory (and the kernel's loopback or veth path) at least twice, so this is
  the physical ceiling the figures below are compared with (ratio column);
- loopback: ``ringleader launch -n 3`` running ``ringleader.cluster.busbw``
  (3 ranks on 127.0.0.1), sizes 1 KiB .. 256 MiB;
- namespace hosts: the same over 3 SSH hosts (one netns each, veth pairs on a
  bridge, sshd per host; ``tests/fixtures/testhosts``), one rank per host;
- doctor: ``ringleader doctor --no-bandwidth`` on the 3 hosts, every check
  but the bandwidth test, median of 5 (target: under 10 s).

The timings live here, not in the tests: ``tests/cluster/test_doctor.py``
checks what doctor says, and a loaded machine must not fail it; this run
reports doctor's time against its target and that every size's bus
bandwidth is above zero (the 4 KiB row too).

Bus bandwidth (nccl-tests' definition): algbw x 2(N-1)/N, where algbw is
the tensor's bytes over one allreduce's time; the table also shows the bytes
each rank must move, 2(N-1)K/N.  ``busbw.measure`` times as many allreduces
as fit in about 0.5 s per size (at most 200) between barriers.

The machine has 2 cores shared by 3 ranks: figures are a floor for what the
same code does on real hosts, useful to compare runs on this machine.  Needs
root (network namespaces), sshd and torch.

Writes bench/results/netbench.json and bench/results/netbench.md (not with
--quick: a smoke run on loopback only, 1K and 64K, a 16 MiB memory copy, no
namespace hosts nor doctor, so it needs neither root nor sshd; it only prints).

Rates and times are shown in the unit that shows the figure (``1.34 MB/s``,
``4.07 ms``); the JSON keeps bytes a second and seconds.

Usage: python bench/netbench.py [--sizes 1K,...,256M] [--doctor-runs 5] [--quick]
       python bench/netbench.py --render   (the markdown again from the JSON)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures.testhosts import TestHostNetwork, require_test_hosts  # noqa: E402

from ringleader.cluster import busbw  # noqa: E402

RESULTS = REPO / "bench" / "results"
SIZES = "1K,4K,16K,64K,256K,1M,4M,16M,64M,256M"
QUICK_SIZES = "1K,64K"
DOCTOR_TARGET_S = 10.0


def memcpy_bandwidth(size: int = 256 * 2**20, runs: int = 7) -> float:
    import torch

    src = torch.ones(size // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up: pages touched
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return size / statistics.median(times)


def doctor_seconds(net: TestHostNetwork, workdir: Path, runs: int) -> list[float]:
    argv = [sys.executable, "-m", "ringleader", "doctor", *(h.address for h in net.hosts),
            "--workdir", str(workdir), "--ssh-config", str(net.ssh_config),
            "--min-free-gb", "0.01", "--no-bandwidth", "--json"]  # fmt: skip
    times = []
    for _ in range(runs):
        start = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        times.append(time.monotonic() - start)
        if done.returncode != 0:
            raise RuntimeError(f"doctor failed:\n{done.stdout}\n{done.stderr}")
    return times


def checked(outcome: busbw.Outcome, what: str) -> list[dict[str, float]]:
    if outcome.error:
        raise RuntimeError(f"{what}: {outcome.error}")
    return outcome.rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=SIZES)
    parser.add_argument("--doctor-runs", type=int, default=5)
    parser.add_argument(
        "--render",
        action="store_true",
        help="write bench/results/netbench.md again from netbench.json; measures nothing",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: loopback only, sizes {QUICK_SIZES}, no namespace hosts nor doctor; "
        "writes nothing",
    )
    args = parser.parse_args()
    if args.render:
        result = json.loads((RESULTS / "netbench.json").read_text())
        (RESULTS / "netbench.md").write_text(markdown(result))
        print(markdown(result))
        return 0
    sizes = [s for s in (QUICK_SIZES if args.quick else args.sizes).split(",") if s]
    if not args.quick:
        require_test_hosts()

    memcpy = memcpy_bandwidth(16 * 2**20, runs=3) if args.quick else memcpy_bandwidth()
    print(f"memory copy: {busbw.rate_text(memcpy)}", flush=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"netbench-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "README").write_text("netbench working directory\n")
    loopback = checked(busbw.run_across([], sizes, str(work), local_ranks=3), "loopback")
    print("loopback done", flush=True)
    remote: list[dict[str, float]] = []
    doctor: list[float] = []
    if not args.quick:
        with TestHostNetwork(3) as net:
            hosts = [(h.address, h.address) for h in net.hosts]
            remote = checked(
                busbw.run_across(hosts, sizes, str(work), ssh_config=str(net.ssh_config)),
                "netns",
            )
            print("namespace hosts done", flush=True)
            doctor = doctor_seconds(net, work, args.doctor_runs)
    result = {
        "benchmark": "netbench",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "memcpy_bytes_per_s": memcpy,
        "ranks": 3,
        "loopback": loopback,
        "netns": remote,
        "doctor_seconds": doctor,
        "doctor_median_s": statistics.median(doctor) if doctor else None,
        "doctor_target_s": DOCTOR_TARGET_S,
    }
    if args.quick:
        print(markdown(result) + "\n(--quick: a smoke run; results not written)")
        return 0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "netbench.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "netbench.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def human(count: float) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if count >= size:
            return f"{count / size:.4g} {unit}iB"
    return f"{count:.0f} B"


def markdown(r: dict) -> str:
    memcpy = r["memcpy_bytes_per_s"]
    netns = r["netns"] or [None] * len(r["loopback"])  # --quick: loopback only
    lines = [
        "# Network benchmark: allreduce bus bandwidth over gloo",
        "",
        f"{r['ranks']} ranks; {r['when']}; {r['machine']['cpus']} CPUs (shared by the ranks, "
        "so a floor). Peer: memory copy (torch `copy_`, 256 MiB) measured in the same run, "
        f'**{busbw.rate_text(memcpy)}**, the ceiling; "of memcpy" = bus bandwidth / memory copy.',
        "",
        "| size | each rank moves 2(N-1)K/N | loopback time | loopback busbw "
        "| of memcpy | netns hosts time | netns busbw | of memcpy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for lo, ns in zip(r["loopback"], netns, strict=True):
        cells = [human(lo["bytes"]), human(lo["moved"])]
        for row in (lo, ns):
            if row is None:
                cells += ["-", "-", "-"]
                continue
            cells += [
                busbw.duration_text(row["seconds"]),
                busbw.rate_text(row["busbw"]),
                f"{100 * row['busbw'] / memcpy:#.2g}%",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    rows = r["loopback"] + r["netns"]
    above = all(row["busbw"] > 0 for row in rows)
    lines += [
        "",
        f"Bus bandwidth above zero at every size, 1 KiB included: {'✅' if above else '❌'}",
    ]
    doctor = r["doctor_seconds"]
    if not doctor:
        return "\n".join([*lines, ""])
    ok = "✅" if r["doctor_median_s"] < r["doctor_target_s"] else "❌"
    lines += [
        "",
        "`ringleader doctor --no-bandwidth`, 3 namespace hosts: "
        f"median **{r['doctor_median_s']:.2f} s** "
        f"(min {min(doctor):.2f}, max {max(doctor):.2f}, {len(doctor)} runs); "
        f"target < {r['doctor_target_s']:g} s {ok}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
