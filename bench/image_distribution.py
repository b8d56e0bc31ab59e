"""Getting one image onto every host: the cluster registry against ``image sync``
against a naive ``podman save | ssh HOST podman load`` to each host in turn
(issue 24, item 7).

The hosts are network-namespace test hosts (``tests/fixtures/testhosts.py``) with
their own podman storage each (``own_containers``), as separate machines have; the
head is this machine.  The image (``--size-mb``, about 1 GB by default) is the
Debian base ``ringleader image base`` makes, plus layers of random bytes up to the
size (random: no compression helps either way).  Per run, every host starts
without the image and the registry starts empty:

- **registry**: ``ringleader image push`` to the registry on the head (at the test
  network's address), then every host pulls it at once, as a gang's agents do
  (``podman pull`` with the registry's password); push and pulls are timed apart;
- **image sync**: ``ringleader image sync IMAGE HOST...`` (each host's ID asked,
  then save | ssh load where it differs, host after host); then the same command
  again with every host current (**sync, current**: nothing is copied);
- **naive**: ``podman save IMAGE | ssh HOST podman load`` for each host in turn.

The peer is the naive copy: each figure is also a ratio to it, same run.  Writes
bench/results/image_distribution.json and .md (not with --quick: 1 host, an image
of a few MB, one run).

Usage: python bench/image_distribution.py [--runs 3] [--hosts 3] [--size-mb 1000]
       python bench/image_distribution.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures.testhosts import TestHostNetwork, require_test_hosts  # noqa: E402

RESULTS = REPO / "bench" / "results"
BASE = "localhost/ringleader/debian-python:bookworm"
IMAGE = "localhost/ringleader-bench/distribution:1"
LAYERS = 4
METHODS = ("registry", "image sync", "sync, current", "naive")


def _run(argv: list[str], timeout: float = 1800, **kw: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)  # type: ignore[call-overload]  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}...: {done.stderr.strip()[-600:]}")
    return str(done.stdout)


def ringleader(*args: str) -> str:
    return _run([sys.executable, "-m", "ringleader", *args])


def make_image(size_mb: int, quick: bool) -> int:
    """``IMAGE``: the base (or nothing, quick) plus random layers; its size in bytes."""
    base = "scratch"
    if not quick:
        if subprocess.run(["podman", "image", "exists", BASE], check=False).returncode:
            ringleader("image", "base", "-t", BASE)
        base = BASE
    with tempfile.TemporaryDirectory() as ctx:
        have = 0 if quick else int(_run(["podman", "image", "inspect", "--format",
                                         "{{.Size}}", BASE]).strip())  # fmt: skip
        each = max(size_mb * 2**20 - have, LAYERS * 2**20) // LAYERS
        lines = [f"FROM {base}"]
        for n in range(LAYERS):
            with open(f"{ctx}/layer{n}", "wb") as out:
                left = each
                while left:
                    chunk = min(left, 2**24)
                    out.write(os.urandom(chunk))
                    left -= chunk
            lines.append(f"COPY layer{n} /data/layer{n}")
        Path(ctx, "Containerfile").write_text("\n".join(lines) + "\n")
        _run(["podman", "build", "-q", "-t", IMAGE, ctx])
    return int(_run(["podman", "image", "inspect", "--format", "{{.Size}}", IMAGE]).strip())


def clear_hosts(net: TestHostNetwork, names: list[str]) -> None:
    for host in net.hosts:
        net.ssh(host, "podman", "rmi", "--ignore", "--force", *names)
        net.ssh(host, "podman", "image", "prune", "--force")


def _ssh(net: TestHostNetwork, host: str, command: str) -> list[str]:
    return ["ssh", "-F", str(net.ssh_config), host, command]


def by_registry(net: TestHostNetwork, home: Path, target: str) -> dict[str, float]:
    """Push to an empty registry, then every host pulls at once."""
    ringleader("registry", "stop", "--data-dir", str(home))
    shutil.rmtree(home / "registry" / "data", ignore_errors=True)
    at, port = target.split("/", 1)[0].split(":")
    ringleader("registry", "start", "--host", at, "--port", port, "--data-dir", str(home))
    start = time.monotonic()
    ringleader("image", "push", IMAGE, "--data-dir", str(home))
    pushed = time.monotonic()
    auth = home / "registry" / "auth.json"
    pull = f"podman pull -q --tls-verify=false --authfile {auth} {target}"
    with ThreadPoolExecutor(len(net.hosts)) as pool:
        list(pool.map(lambda h: _run(_ssh(net, h.address, pull)), net.hosts))
    end = time.monotonic()
    return {"push_s": pushed - start, "pull_s": end - pushed, "total_s": end - start}


def by_sync(net: TestHostNetwork) -> float:
    start = time.monotonic()
    ringleader("image", "sync", IMAGE, *(h.address for h in net.hosts),
               "--ssh-config", str(net.ssh_config))  # fmt: skip
    return time.monotonic() - start


def by_naive(net: TestHostNetwork) -> float:
    start = time.monotonic()
    for host in net.hosts:
        save = subprocess.Popen(["podman", "save", IMAGE], stdout=subprocess.PIPE)
        _run(_ssh(net, host.address, "podman load -q"), stdin=save.stdout)
        assert save.stdout is not None
        save.stdout.close()
        if save.wait():
            raise SystemExit("podman save failed")
    return time.monotonic() - start


def measure(net: TestHostNetwork, home: Path, runs: int) -> dict[str, list[float]]:
    with socket.socket() as probe:
        probe.bind((net.bridge_address, 0))
        port = probe.getsockname()[1]
    target = f"{net.bridge_address}:{port}/ringleader-bench/distribution:1"
    found: dict[str, list[float]] = {m: [] for m in (*METHODS, "push", "pulls")}
    try:
        for _ in range(runs):
            clear_hosts(net, [IMAGE, target])
            registry = by_registry(net, home, target)
            found["registry"].append(registry["total_s"])
            found["push"].append(registry["push_s"])
            found["pulls"].append(registry["pull_s"])
            clear_hosts(net, [IMAGE, target])
            found["image sync"].append(by_sync(net))
            found["sync, current"].append(by_sync(net))
            clear_hosts(net, [IMAGE, target])
            found["naive"].append(by_naive(net))
    finally:
        ringleader("registry", "stop", "--data-dir", str(home))
    return found


def table(medians: dict[str, float], hosts: int, size: int, runs: int) -> list[str]:
    naive = medians["naive"]
    rows = [
        "| method | seconds (median) | / naive |",
        "|---|---|---|",
    ]
    for method in METHODS:
        rows.append(f"| {method} | {medians[method]:.2f} | {medians[method] / naive:.2f}x |")
    rows.append(f"| registry: push | {medians['push']:.2f} | |")
    rows.append(f"| registry: {hosts} pull(s) at once | {medians['pulls']:.2f} | |")
    rows.append("")
    rows.append(f"An image of {size / 1e6:.0f} MB to {hosts} hosts, {runs} run(s).")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="1 host, a few MB, 1 run")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.hosts, args.size_mb = 1, 1, 4
    require_test_hosts()
    for tool in ("podman", "docker-registry"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (make setup installs it)")
    size = make_image(args.size_mb, args.quick)
    home = Path(tempfile.mkdtemp(prefix="rl-bench-dist-"))
    try:
        with TestHostNetwork(args.hosts, own_containers=True) as net:
            found = measure(net, home, args.runs)
    finally:
        subprocess.run(["podman", "rmi", "--ignore", "--force", IMAGE], capture_output=True,
                       check=False)  # fmt: skip
        shutil.rmtree(home, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in found.items()}
    rows = table(medians, args.hosts, size, args.runs)
    print("\n".join(rows))
    if args.quick:
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"when": stamp, "machine": platform.platform(), "hosts": args.hosts,
              "image_bytes": size, "runs": found, "medians": medians}  # fmt: skip
    (RESULTS / "image_distribution.json").write_text(json.dumps(record, indent=2) + "\n")
    head = [
        "# An image to every host: registry vs image sync vs naive save | ssh load "
        "(bench/image_distribution.py)",
        "",
        f"{stamp}, {platform.platform()}.",
        "",
    ]
    (RESULTS / "image_distribution.md").write_text("\n".join(head + rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
