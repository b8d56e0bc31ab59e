"""Image pods against process pods: what running a rank in a container costs (issue 24, item 7).

One real ``ringleader server`` (local backend, podman) runs the same 2-pod gang
(``--workers 1``: a master and a worker) two ways, alternating, same run:

(a) process pods: the server's Python;
(b) image pods: ``podman run`` of an image already in the store (``--image-pull-policy
    Never``), the container in its pod's cgroup.

Two programs:
- ``start``: each rank prints the wall clock as its first act (``python3 -c``): the
  pure cost of getting a rank running; the figure behind the target *container start
  adds <= 1.0 s per pod when the image is present* is (b) - (a) of "submit -> last
  rank started";
- ``digits`` (not with ``--quick``): seed 002's example, ``--epochs 3 --bench``, in
  ``examples/images/pytorch-cpu/Containerfile``'s image (built with ``ringleader
  image base`` and ``image build`` when missing): submit -> first training step,
  and the whole job (submit -> Completed seen by the API).

Every process is on this machine, so one clock.  Getting an image onto SSH hosts
(registry, ``image sync``, naive save | ssh load) is ``bench/image_distribution.py``.
Writes bench/results/images.json and bench/results/images.md (not with --quick).

Usage: python bench/images.py [--runs 5]
       python bench/images.py --quick
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_server import API, FINAL, Server

REPO = Path(__file__).resolve().parents[1]

RESULTS = REPO / "bench" / "results"
BASE = "localhost/ringleader/debian-python:bookworm"
TORCH_IMAGE = "localhost/ringleader/pytorch-cpu:2.13"
CONTAINERFILE = REPO / "examples" / "images" / "pytorch-cpu" / "Containerfile"
START = "import time; print('RINGLEADER_BENCH started_unix=%f' % time.time(), flush=True)"
STARTED = re.compile(r"RINGLEADER_BENCH started_unix=([0-9.]+)")
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
TARGET_ADDED_S = 1.0
PODS = 2


def ensure_images(torch: bool) -> None:
    """The base (and the PyTorch CPU image) in podman's store, made here if missing."""
    from ringleader.cluster.images import build, make_base

    def present(tag: str) -> bool:
        return subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0

    if not present(BASE):
        make_base(BASE)
    if torch and not present(TORCH_IMAGE):
        with tempfile.TemporaryDirectory() as cache:
            build(str(CONTAINERFILE), TORCH_IMAGE, str(REPO), Path(cache), [])


def run_once(server: Server, name: str, command: str, image: str | None) -> dict[str, float]:
    """Submit one gang; seconds from the submission to its last rank started, to its
    first training step (where the program prints one) and to Completed."""
    spec: dict[str, Any] = {"command": command, "numWorkers": 1, "workingDir": "/tmp"}
    if image:
        spec |= {"image": image, "imagePullPolicy": "Never"}
    body = {"name": name, "projectId": server.project_id, "spec": spec}
    started = time.time()
    response = server.request("POST", f"{API}/distributed", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"submit {name}: {response.status_code} {response.text}")
    workload = response.json()["workloadId"]
    phase = ""
    while phase not in FINAL:
        phase = server.get(f"{API}/{workload}")["actualPhase"]
        time.sleep(0.05)
    ended = time.time()
    logs = server.request("GET", f"{API}/{workload}/logs").text
    if phase != "Completed":
        raise RuntimeError(f"{name} ended {phase}:\n{logs}")
    out = {"whole_s": ended - started}
    starts = [float(v) for v in STARTED.findall(logs)]
    if starts:
        if len(starts) != PODS:
            raise RuntimeError(f"{name}: {len(starts)} ranks said they started:\n{logs}")
        out["last_started_s"] = max(starts) - started
    first = FIRST.findall(logs)
    if first:
        out["first_step_s"] = float(first[0]) - started
    server.request("DELETE", f"{API}/distributed/{workload}")
    return out


def measure(server: Server, runs: int, torch: bool) -> dict[str, dict[str, list[float]]]:
    """Each program, each way, ``runs`` times, alternating ways."""
    python = sys.executable
    programs = {"start": (f'{python} -c "{START}"', 'python3 -c "' + START + '"', BASE)}
    if torch:
        digits = "python -m ringleader.examples.digits --epochs 3 --bench"
        programs["digits"] = (digits, digits, TORCH_IMAGE)
    found: dict[str, dict[str, list[float]]] = {}
    for program, (as_process, in_image, image) in programs.items():
        for run in range(runs):
            for way, command, img in (("process", as_process, None), ("image", in_image, image)):
                result = run_once(server, f"{program}-{way}-{run}", command, img)
                for key, value in result.items():
                    found.setdefault(f"{program}/{way}/{key}", {}).setdefault("s", []).append(value)
    return found


def summary(found: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    return {key: statistics.median(v["s"]) for key, v in found.items()}


def table(medians: dict[str, float], runs: int) -> list[str]:
    rows = ["| program | figure (median s) | process pods | image pods | image / process |",
            "|---|---|---|---|---|"]  # fmt: skip
    for program, figure in (("start", "last_started_s"), ("start", "whole_s"),
                            ("digits", "first_step_s"), ("digits", "whole_s")):  # fmt: skip
        a, b = medians.get(f"{program}/process/{figure}"), medians.get(f"{program}/image/{figure}")
        if a is None or b is None:
            continue
        rows.append(f"| {program} | {figure} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    a, b = medians.get("start/process/last_started_s"), medians.get("start/image/last_started_s")
    if a is not None and b is not None:
        added = b - a
        verdict = "met" if added <= TARGET_ADDED_S else "missed"
        what = f"added by the container, {PODS} pods together (target <= {TARGET_ADDED_S:g} s)"
        rows.append(f"| start | {what} | | {added:.2f} | {verdict} |")
    rows.append(f"\n{runs} run(s) each, alternating; getting an image to SSH hosts is "
                "bench/image_distribution.py's.")  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 run, the start program only")
    args = parser.parse_args()
    if shutil.which("podman") is None:
        print("podman is missing (make setup installs it)", file=sys.stderr)
        return 2
    runs, torch = (1, False) if args.quick else (args.runs, True)
    ensure_images(torch)
    with tempfile.TemporaryDirectory(prefix="rl-bench-images-") as home:
        server = Server(Path(home), None)
        server.start()
        try:
            found = measure(server, runs, torch)
        finally:
            server.stop()
    medians = summary(found)
    rows = table(medians, runs)
    print("\n".join(rows))
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        where = f"{platform.platform()}, podman; a gang of {PODS} pods, image present"
        head = f"# Image pods against process pods (bench/images.py)\n\n{stamp}, {where}.\n"
        (RESULTS / "images.md").write_text(head + "\n" + "\n".join(rows) + "\n")
        payload = {"when": stamp, "runs": runs, "medians": medians, "samples": found}
        (RESULTS / "images.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
