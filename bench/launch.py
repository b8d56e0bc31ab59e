"""Launch benchmark: ringleader launch -n 2 vs torchrun --standalone, same machine, same run.

Measures, for the digits example on 2 ranks:
- time to first step: from starting the launcher command to the end of the
  first optimizer step on rank 0 (the example prints the wall-clock time);
- steady steps/s: optimizer steps per second after the warm-up, as the
  example reports it.
And the launcher's fixed cost: the wall time of ``ringleader launch -n 2 --
python -c pass`` against ``mpirun -np 2 python -c pass`` (the same Python),
the price of starting a gang that does nothing (target, issue 27: at most
1.5x mpirun), beside one bare ``python -c pass`` (the floor either pays twice
over: a rank, and the launcher's own interpreter).  The warm-up run may write
bytecode (``PYTHONDONTWRITEBYTECODE`` dropped for it): the measured runs then
load ringleader as an installed package does, not a checkout's edited sources
compiled anew on every start.  Runs alternate (ringleader, torchrun,
ringleader, ...) so drift hits both; the load average is recorded with them.
Writes bench/results/launch.json and bench/results/launch.md (not with
--quick, a small smoke run that only prints); ``--fixed-only`` measures the
fixed cost alone and writes bench/results/launch_fixed.json and .md.

Usage: python bench/launch.py [--runs 7] [--epochs 30] [--fixed-rounds 21]
       python bench/launch.py --fixed-only [--fixed-rounds 21]
       python bench/launch.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FIRST = re.compile(r"RINGLEADER_BENCH first_step_unix=([0-9.]+)")
STEADY = re.compile(r"RINGLEADER_BENCH steady_steps_per_s=([0-9.]+)")
TARGET_FIRST_STEP_RATIO = 1.10
TARGET_STEADY_RATIO = 0.98
TARGET_FIXED_COST_RATIO = 1.5


def fixed_cost_commands() -> dict[str, list[str]] | None:
    """The no-op gang, by ringleader and by mpirun; None when mpirun is not installed."""
    py = sys.executable
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return None
    extra = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    if (os.cpu_count() or 1) < 2:
        extra.append("--oversubscribe")
    return {
        "ringleader": [py, "-m", "ringleader", "launch", "-n", "2", "--", py, "-c", "pass"],
        "mpirun": [mpirun, *extra, "-np", "2", py, "-c", "pass"],
        "python": [py, "-c", "pass"],
    }


def fixed_cost(rounds: int) -> dict[str, object] | None:
    """Alternating wall times of the no-op gang; medians and their ratio."""
    cmds = fixed_cost_commands()
    if cmds is None:
        print("fixed cost: mpirun not found, skipped", flush=True)
        return None
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    # Warm the page cache for all, and let Python write what bytecode it lacks.
    writes = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for argv in cmds.values():
        subprocess.run(argv, capture_output=True, timeout=120, check=True, env=writes)
    load_before = os.getloadavg()
    for i in range(rounds):
        for name, argv in cmds.items():
            started = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            samples[name].append(time.perf_counter() - started)
            if proc.returncode != 0:
                raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        print(
            f"fixed cost round {i + 1}/{rounds}: ringleader {samples['ringleader'][-1]:.3f}s "
            f"mpirun {samples['mpirun'][-1]:.3f}s python {samples['python'][-1]:.3f}s",
            flush=True,
        )
    med = {name: statistics.median(values) for name, values in samples.items()}
    ratio = med["ringleader"] / med["mpirun"]
    return {
        "commands": {name: " ".join(argv) for name, argv in cmds.items()},
        "rounds": rounds,
        "load_average": {"before": load_before, "after": os.getloadavg()},
        # Busier than its cores: the ratio understates a quiet machine's (see the table).
        "loaded": load_before[0] > (os.cpu_count() or 1),
        "median_s": med,
        "samples_s": samples,
        "ratio_vs_mpirun": ratio,
        "target_ratio_max": TARGET_FIXED_COST_RATIO,
        "meets_target": ratio <= TARGET_FIXED_COST_RATIO,
    }


def commands(epochs: int) -> dict[str, list[str]]:
    py = sys.executable
    example = ["-m", "ringleader.examples.digits", "--epochs", str(epochs), "--bench"]
    return {
        "ringleader": [py, "-m", "ringleader", "launch", "-n", "2", "--", py, *example],
        "torchrun": [
            py,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            *example,
        ],
    }


def run_once(argv: list[str]) -> dict[str, float]:
    started = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    ended = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    first = FIRST.search(proc.stdout)
    steady = STEADY.search(proc.stdout)
    if not first or not steady:
        raise RuntimeError(
            f"no RINGLEADER_BENCH lines in output of {argv[:4]}:\n{proc.stdout[-2000:]}"
        )
    return {
        "first_step_s": float(first.group(1)) - started,
        "steady_steps_per_s": float(steady.group(1)),
        "wall_s": ended - started,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="runs per launcher (median is reported)"
    )
    parser.add_argument(
        "--epochs", type=int, default=30, help="long enough that steady steps/s is not noise"
    )
    parser.add_argument(
        "--fixed-rounds", type=int, default=21, help="no-op gangs per launcher (median reported)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="1 run of 2 epochs, 3 no-op rounds; writes nothing"
    )
    parser.add_argument(
        "--fixed-only", action="store_true", help="the no-op gang only (launch_fixed.json/.md)"
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.epochs, args.fixed_rounds = 1, 2, 3
    fixed = fixed_cost(args.fixed_rounds)
    if args.fixed_only:
        return write_fixed_only(fixed)
    cmds = commands(args.epochs)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in cmds}
    run_once(
        cmds["ringleader"]
    )  # warm the page cache for torch's import, for neither side's benefit
    failures: dict[str, list[str]] = {name: [] for name in cmds}
    for i in range(args.runs):
        for name, argv in cmds.items():
            for _try in range(3):  # a failed run is recorded, not hidden, then retried
                try:
                    sample = run_once(argv)
                    break
                except RuntimeError as exc:
                    failures[name].append(str(exc)[-600:])
                    print(f"run {i + 1}/{args.runs} {name}: FAILED, retrying", flush=True)
            else:
                raise SystemExit(f"{name} failed 3 times in a row; see above")
            samples[name].append(sample)
            print(
                f"run {i + 1}/{args.runs} {name:10s} first step {sample['first_step_s']:.3f}s "
                f"steady {sample['steady_steps_per_s']:.1f} steps/s",
                flush=True,
            )
    med = {
        name: {k: statistics.median(s[k] for s in runs) for k in runs[0]}
        for name, runs in samples.items()
    }
    first_ratio = med["ringleader"]["first_step_s"] / med["torchrun"]["first_step_s"]
    steady_ratio = med["ringleader"]["steady_steps_per_s"] / med["torchrun"]["steady_steps_per_s"]
    report = {
        "benchmark": "launch",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "workload": f"ringleader.examples.digits, 2 ranks, gloo, {args.epochs} epochs",
        "runs": args.runs,
        "median": med,
        "samples": samples,
        "failed_runs": {name: len(f) for name, f in failures.items()},
        "failures": failures,
        "ratios": {
            "first_step_vs_torchrun": first_ratio,
            "steady_steps_per_s_vs_torchrun": steady_ratio,
        },
        "targets": {
            "first_step_vs_torchrun_max": TARGET_FIRST_STEP_RATIO,
            "steady_steps_per_s_vs_torchrun_min": TARGET_STEADY_RATIO,
        },
        "meets_targets": first_ratio <= TARGET_FIRST_STEP_RATIO
        and steady_ratio >= TARGET_STEADY_RATIO
        and (fixed is None or bool(fixed["meets_target"])),
        "fixed_cost": fixed,
    }
    rl, tr = med["ringleader"], med["torchrun"]
    table = "\n".join(
        [
            "# Launch benchmark: ringleader launch vs torchrun --standalone",
            "",
            f"{report['workload']}; median of {args.runs} alternating runs each; {report['date']}; "
            f"{os.cpu_count()} CPUs.",
            "",
            "| metric | ringleader | torchrun | ratio | target |",
            "|---|---|---|---|---|",
            f"| time to first step (s) | {rl['first_step_s']:.3f} | {tr['first_step_s']:.3f} | "
            f"{first_ratio:.3f} | <= {TARGET_FIRST_STEP_RATIO} |",
            f"| steady steps/s | {rl['steady_steps_per_s']:.1f} | {tr['steady_steps_per_s']:.1f} | "
            f"{steady_ratio:.3f} | >= {TARGET_STEADY_RATIO} |",
            f"| whole job wall time (s) | {rl['wall_s']:.2f} | {tr['wall_s']:.2f} | "
            f"{rl['wall_s'] / tr['wall_s']:.3f} | |",
            "",
            *fixed_cost_table(fixed),
        ]
    )
    print(table)
    if args.quick:
        print("--quick: nothing written")
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "launch.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "launch.md").write_text(table)
    return 0


def write_fixed_only(fixed: dict[str, Any] | None) -> int:
    """``--fixed-only``: print the fixed cost's table and write it apart."""
    if fixed is None:
        raise SystemExit("mpirun is not installed: the fixed cost has nothing to compare with")
    fixed = {
        "benchmark": "launch_fixed",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **fixed,
    }
    table = "\n".join(fixed_cost_table(fixed))
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "launch_fixed.json").write_text(json.dumps(fixed, indent=2) + "\n")
    (RESULTS / "launch_fixed.md").write_text("# Launch benchmark: the fixed cost\n\n" + table)
    return 0 if fixed["meets_target"] else 1


def fixed_cost_table(fixed: dict[str, Any] | None) -> list[str]:
    if fixed is None:
        return ["Fixed cost: not measured (no mpirun).", ""]
    med = fixed["median_s"]
    load = fixed.get("load_average") or {}
    said = (
        f" Load average (1, 5, 15 min) before: {_load(load['before'])}; after: "
        f"{_load(load['after'])}."
        if load
        else ""
    )
    if load and load["before"][0] > (os.cpu_count() or 1):
        said += (
            " With a load average above the CPU count every process waits for a core, which"
            " adds to both sides alike: the ratio shrinks toward 1, and a quiet machine's is"
            " higher."
        )
    bare = f" | {med['python']:.3f}" if "python" in med else " | "
    return [
        "## Fixed cost: a no-op gang of 2 ranks",
        "",
        f"`ringleader launch -n 2 -- python -c pass` vs `mpirun -np 2 python -c pass` (same "
        f"Python); median of {fixed['rounds']} alternating runs each, beside one bare "
        f"`python -c pass`.{said}",
        "",
        "| ringleader (s) | mpirun (s) | ratio | target | python -c pass (s) |",
        "|---|---|---|---|---|",
        f"| {med['ringleader']:.3f} | {med['mpirun']:.3f} | {fixed['ratio_vs_mpirun']:.2f} | "
        f"<= {TARGET_FIXED_COST_RATIO:g}{bare} |",
        "",
    ]


def _load(values: list[float] | tuple[float, ...]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    sys.exit(main())
