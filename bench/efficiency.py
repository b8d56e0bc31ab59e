"""Communication-efficient modes on a slow link: plain DDP vs bf16 vs PowerSGD vs local SGD.

Four ranks, one on each of four SSH test hosts (network namespaces:
``ringleader testhosts``' hosts), launched by ``ringleader launch --hostfile
... --grad-compression MODE`` / ``--sync-every H``: the flags' path to
``runtime.prepare`` is the one users take.  The model is an MLP of 5.4M
parameters (64-2048-2048-512-10) on scikit-learn's digits (1,437 training
images, 360 test images, shipped with the package: no download).

Two phases per mode, in one run:

- *throughput*, every host's link held to ``--rate`` (100 Mbit/s by default,
  ``tc tbf`` on both ends of each veth: ``testhosts.rate.set_rate``, removed
  after): ``--timed`` steps after ``--skip`` steps (the skip covers torch's
  warm-up of exact all-reduce in PowerSGD and local SGD, ``modes.WARMUP_STEPS``),
  samples/s = global batch x steps / their wall time on rank 0; also the mean
  communication per step that ``runtime.prepare``'s timers measured;
- *accuracy*, links unlimited (the rate changes time, not arithmetic):
  ``--epochs`` epochs of the same training, then rank 0's test accuracy (local
  SGD's copies are averaged once more at the end, with torch's
  ``model_averaging.utils.average_parameters``, as a user would).

Target (issue 28, item 3): a mode >= 2x plain DDP's samples/s at 100 Mbit with
test accuracy within 1 point.  Needs root (namespaces, tc), sshd and torch.
Writes bench/results/efficiency.json and .md (not with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO))

from ringleader.cluster.testhosts import rate  # noqa: E402
from ringleader.cluster.testhosts.network import TestHostNetwork  # noqa: E402
from ringleader.runtime.modes import WARMUP_STEPS  # noqa: E402

MODES = {  # name -> launch flags
    "plain DDP": [],
    "bf16": ["--grad-compression", "bf16"],
    "powersgd:2": ["--grad-compression", "powersgd:2"],
    "sync every 8": ["--sync-every", "8"],
}
WARMED = ("powersgd:2", "sync every 8")  # their first WARMUP_STEPS steps are exact DDP

PROGRAM = r"""
import json, sys, time
import numpy as np, torch, torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from ringleader import runtime
from ringleader.runtime import modes, steptime

args = json.loads(sys.argv[1])
ctx = runtime.init(timeout_s=120)
digits = load_digits()
x_tr, x_te, y_tr, y_te = train_test_split(
    digits.data.astype(np.float32) / 16.0, digits.target, test_size=360, random_state=0,
    stratify=digits.target)
x_tr, x_te = torch.from_numpy(x_tr), torch.from_numpy(x_te)
y_tr, y_te = torch.from_numpy(y_tr).long(), torch.from_numpy(y_te).long()
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(64, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
    torch.nn.Linear(2048, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
params = sum(p.numel() for p in net.parameters())
opt = torch.optim.SGD(net.parameters(), lr=args["lr"], momentum=0.9)
model, opt = runtime.prepare(net, opt)
sampler = runtime.shard(range(len(x_tr)), seed=0, drop_last=True)
batch = args["batch"]
done, marks, comm = 0, {}, []
epoch = 0
while done < args["steps"]:
    sampler.set_epoch(epoch)
    order = list(sampler)
    for start in range(0, len(order) - batch + 1, batch):
        idx = torch.tensor(order[start:start + batch])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
        loss.backward()
        opt.step()
        done += 1
        if done == args["skip"]:
            steptime.take()
            marks["start"] = time.perf_counter()
        if done == args["skip"] + args["timed"]:
            marks["end"] = time.perf_counter()
            comm.append(steptime.take())
        if done >= args["steps"]:
            break
    epoch += 1
if modes.SYNC_EVERY_ENV in __import__("os").environ:  # local SGD: one last average
    average_parameters(iter(net.parameters()), dist.group.WORLD)
with torch.no_grad():
    accuracy = (net(x_te).argmax(1) == y_te).float().mean().item()
if ctx.rank == 0:
    out = {"params": params, "steps": done, "accuracy": accuracy,
           "global_batch": batch * ctx.world_size}
    if "end" in marks:
        seconds = marks["end"] - marks["start"]
        out.update(timed_s=seconds, samples_per_s=args["timed"] * batch * ctx.world_size / seconds,
                   step_s=seconds / args["timed"], comm_s=comm[0])
    print("RESULT " + json.dumps(out), flush=True)
runtime.shutdown()
"""


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def launch(net: TestHostNetwork, work: Path, flags: list[str], args: dict[str, object]) -> dict:
    """One training run by ``ringleader launch``; rank 0's RESULT line, plus the load."""
    argv = [
        sys.executable, "-m", "ringleader", "launch", "--hostfile", "hosts.json",
        "--ssh-config", str(net.ssh_config), "-e", "OMP_NUM_THREADS=1", *flags,
        "--", "python", "prog.py", json.dumps(args),
    ]  # fmt: skip
    before = loadavg()
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        Path("/tmp/efficiency-fail.log").write_text(proc.stdout + proc.stderr)
        raise SystemExit(f"{flags}: exit {proc.returncode}: /tmp/efficiency-fail.log")
    line = next(x for x in proc.stdout.splitlines() if "RESULT " in x)
    result = json.loads(line.split("RESULT ", 1)[1])
    return {**result, "wall_s": time.monotonic() - started, "load_before": before,
            "load_after": loadavg()}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", default="100mbit", help="each host's link (tc tbf)")
    parser.add_argument("--batch", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument(
        "--skip", type=int, default=2, help="steps before the timed ones (+ warm-up)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="throughput runs of each mode")
    parser.add_argument("--timed", type=int, default=16, help="timed steps (a multiple of 8)")
    parser.add_argument("--epochs", type=int, default=20, help="of the accuracy phase")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="8 timed steps, 2 epochs, no file")
    args = parser.parse_args()
    if args.quick:
        args.timed, args.epochs, args.rounds = 8, 2, 1
    chosen = [m.strip() for m in args.modes.split(",")]
    bits = rate.parse_rate(args.rate)
    steps_per_epoch = (1437 // 4) // args.batch
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="efficiency-") as tmp, TestHostNetwork(4) as net:
        work = Path(tmp)
        (work / "prog.py").write_text(PROGRAM)
        hosts = [{"ssh": h.address, "ips": [h.address], "slots": 1} for h in net.hosts]
        (work / "hosts.json").write_text(json.dumps(hosts))
        common = {"batch": args.batch, "lr": args.lr, "skip": args.skip, "timed": args.timed}
        try:
            print(rate.set_rate(net.hosts, bits), flush=True)
            for round_ in range(args.rounds):  # modes alternate: load drifts over a run
                for name in chosen:
                    skip = args.skip + (WARMUP_STEPS if name in WARMED else 0)
                    steps = skip + args.timed
                    got = launch(net, work, MODES[name], {**common, "skip": skip, "steps": steps})
                    results.setdefault(name, {"runs": []})["runs"].append(got)
                    print(f"round {round_}, {name} at {args.rate}: {got}", flush=True)
        finally:
            print(rate.set_rate(net.hosts, None), flush=True)
        left = [r for r in rate.rates(net.hosts) if r != (None, None)]
        assert not left, f"a rate is left on the links: {left}"
        for name in chosen:
            steps = args.epochs * steps_per_epoch
            got = launch(net, work, MODES[name], {**common, "steps": steps})
            runs = results[name]["runs"]
            results[name]["throughput"] = sorted(runs, key=lambda r: r["samples_per_s"])[
                (len(runs) - 1) // 2
            ]  # the median run (the lower one of two)
            results[name]["accuracy"] = got
            print(f"{name} unlimited, {steps} steps: {got}", flush=True)
    result = {
        "benchmark": "efficiency",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rate": args.rate, "ranks": 4, "hosts": 4,
        "settings": {**common, "epochs": args.epochs, "rounds": args.rounds},
        "modes": results,
    }  # fmt: skip
    text = markdown(result)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "efficiency.json").write_text(json.dumps(result, indent=1) + "\n")
        (RESULTS / "efficiency.md").write_text(text)
    return 0


def markdown(r: dict) -> str:
    modes = r["modes"]
    base = modes.get("plain DDP")
    s = r["settings"]
    params = next(iter(modes.values()))["throughput"]["params"]
    lines = [
        f"# Communication-efficient modes at {r['rate']}: 4 ranks on 4 test hosts",
        "",
        f"{r['when']}, {r['machine']['cpus']} CPUs. MLP of {params / 1e6:.1f}M parameters on"
        f" sklearn's digits, batch {s['batch']} per rank ({4 * s['batch']} global), SGD lr"
        f" {s['lr']} momentum 0.9. Throughput: {s['timed']} steps after {s['skip']} (PowerSGD"
        f" and local SGD: after {s['skip']} + their {WARMUP_STEPS} warm-up steps of exact DDP)"
        f" at {r['rate']} each way per host (tc tbf), the median of {s['rounds']} runs, modes"
        f" alternating; accuracy: {s['epochs']} epochs, links unlimited, rank 0's model on"
        " the 360 test images.",
        "",
        "| mode | samples/s | vs plain | each run | step | comm per step | test accuracy"
        " | vs plain | load (1/5/15) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, got in modes.items():
        t, a = got["throughput"], got["accuracy"]
        speed = f"{t['samples_per_s'] / base['throughput']['samples_per_s']:.2f}x" if base else "-"
        acc = f"{(a['accuracy'] - base['accuracy']['accuracy']) * 100:+.1f} pt" if base else "-"
        each = ", ".join(f"{x['samples_per_s']:.0f}" for x in got["runs"])
        lines.append(
            f"| {name} | {t['samples_per_s']:.0f} | {speed} | {each}"
            f" | {t['step_s'] * 1000:.0f} ms"
            f" | {t['comm_s'] * 1000:.0f} ms | {a['accuracy'] * 100:.1f}% | {acc}"
            f" | {t['load_before']} |"
        )
    lines += [
        "",
        "Comm per step: what `runtime.prepare`'s timers measured on rank 0 (the wait"
        " the backward pass could not hide, and local SGD's averaging).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
