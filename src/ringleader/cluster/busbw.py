"""Allreduce bus bandwidth over gloo: what ``doctor`` and ``bench/netbench.py`` run
on every rank, started by ``ringleader launch``.

    python -m ringleader.cluster.busbw 1K 1M 64M   -> rank 0 prints one line:
    RINGLEADER-BUSBW [{"bytes", "ranks", "seconds", "algbw", "busbw", "moved"}, ...]

Nomenclature (as in nccl-tests):
- *algbw*: the tensor's bytes K over the time of one allreduce;
- *busbw*: algbw x 2(N-1)/N, what each rank's link carries in a ring
  allreduce: comparable across rank counts and with a link's speed;
- *moved*: 2(N-1)K/N, the bytes each rank must send (and receive).

Each size runs a warm-up, then as many timed allreduces as fit in about
``TARGET_S`` (the count rank 0 picks after the warm-up, broadcast so every
rank does the same number), between barriers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

MARKER = "RINGLEADER-BUSBW"
TARGET_S = 0.5
MAX_ITERS = 200
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    """``64M`` -> 67108864 (binary units, as nccl-tests' -b/-e read them)."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
    number = text[: len(text) - len(unit)]
    if not number.isdigit() or int(number) * UNITS[unit] < 4:
        raise ValueError(f"not a size of at least 4 bytes: {text!r} (e.g. 1K, 64M)")
    return int(number) * UNITS[unit]


def moved(size: int, ranks: int) -> float:
    """Bytes each rank sends in a ring allreduce of ``size`` bytes: 2(N-1)K/N."""
    return 2 * (ranks - 1) * size / ranks if ranks > 1 else 0.0


def three_digits(value: float) -> str:
    """1.23, 12.3, 123: three significant digits, never an exponent."""
    return f"{value:.{2 if value < 9.995 else 1 if value < 99.95 else 0}f}"


def rate_text(per_second: float) -> str:
    """Bytes a second in the unit that shows the figure (decimal, as nccl-tests'
    GB/s): ``1.33 MB/s`` where a fixed GB/s column would print ``0.001``."""
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if per_second >= size * 0.9995:
            return f"{three_digits(per_second / size)} {unit}"
    return f"{three_digits(per_second)} B/s"


def duration_text(seconds: float) -> str:
    """``4.07 ms``, ``290 ms``, ``1.50 s``, ``50.0 µs``."""
    for unit, size in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= size * 0.9995:
            return f"{three_digits(seconds / size)} {unit}"
    return f"{three_digits(seconds * 1e6)} µs"


def measure(sizes: list[int]) -> list[dict[str, float]]:
    import torch
    import torch.distributed as dist

    ranks = dist.get_world_size()
    rows = []
    for size in sizes:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(2):
            dist.all_reduce(tensor)
        warm = (time.perf_counter() - start) / 2
        iters = torch.tensor([max(1, min(MAX_ITERS, int(TARGET_S / max(warm, 1e-6))))])
        dist.broadcast(iters, 0)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(int(iters.item())):
            dist.all_reduce(tensor)
        dist.barrier()
        seconds = (time.perf_counter() - start) / int(iters.item())
        algbw = tensor.numel() * 4 / seconds
        rows.append(
            {
                "bytes": tensor.numel() * 4,
                "ranks": ranks,
                "iterations": int(iters.item()),
                "seconds": seconds,
                "algbw": algbw,
                "busbw": algbw * (2 * (ranks - 1) / ranks if ranks > 1 else 1.0),
                "moved": moved(tensor.numel() * 4, ranks),
            }
        )
    return rows


@dataclass
class Outcome:
    """What a run across hosts found: rows when it worked, else the error's tail."""

    rows: list[dict[str, float]] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0


def run_across(
    hosts: list[tuple[str, str]],
    sizes: list[str],
    workdir: str,
    ssh_config: str | None = None,
    interface: str | None = None,
    timeout_s: float = 300.0,
    local_ranks: int = 0,
) -> Outcome:
    """``ringleader launch`` one rank per host ``(ssh target, address)`` running this
    module (or ``local_ranks`` ranks on this machine when ``hosts`` is empty);
    rank 0's line parsed."""
    with tempfile.TemporaryDirectory(prefix="ringleader-busbw-") as tmp:
        hostfile = os.path.join(tmp, "hosts.json")
        with open(hostfile, "w") as handle:
            json.dump([{"ssh": ssh, "ips": [address]} for ssh, address in hosts], handle)
        argv = [sys.executable, "-m", "ringleader", "launch"]
        argv += ["--hostfile", hostfile] if hosts else ["-n", str(local_ranks)]
        argv += ["--ssh-config", ssh_config] if ssh_config else []
        argv += ["--network-interface", interface] if interface else []
        argv += ["--no-prefix", "--", "python", "-m", "ringleader.cluster.busbw", *sizes]
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv, cwd=workdir, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            return Outcome(error=f"no result in {timeout_s:g} s")
    seconds = time.monotonic() - started
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            return Outcome(json.loads(line[len(MARKER) :]), seconds=seconds)
    tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-6:]
    return Outcome(error="\n".join(tail) or f"exit {done.returncode}", seconds=seconds)


def main(argv: list[str]) -> int:
    import torch.distributed as dist

    sizes = [parse_size(a) for a in argv] or [2**20, 16 * 2**20, 64 * 2**20]
    dist.init_process_group("gloo")
    try:
        rows = measure(sizes)
        if dist.get_rank() == 0:
            print(f"{MARKER} {json.dumps(rows)}", flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
