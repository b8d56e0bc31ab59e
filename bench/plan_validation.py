"""Validation of ``ringleader plan`` (issue 28 item 1): predicted against measured
throughput of real DDP training on rate-limited test hosts.

What runs, all in one run:
- the job: a synthetic MLP (``make_model``: 1024-2048-1024-10, about 4.2M fp32
  parameters, 16.8 MB of gradients a step) trained with DDP over gloo, one rank per
  test host (a netns with its own sshd, started by ``ringleader launch
  --hostfile``), batch ``--batch-size`` of random data, one torch thread per rank;
  rank 0 times ``--steps`` steps after two warm-up steps and prints the samples a
  second of the whole job at the median step (the machine is shared: another
  program's load spike slows a step or two, not the median);
- the links: the hosts' veths limited with ``tc tbf`` (``testhosts.rate``) to
  each ``--rates`` (default 100mbit and 250mbit), each way;
- the prediction: ``ringleader plan --model plan_validation:make_model
  --batch-size B --threads 1 --shared-cores CORES --link RATE --json`` (the compute
  timed by ``plan`` itself, here, in one process), read for N = 2, 4, 8; and again
  with the link measured by ``plan --hostfile`` (the modes: only that way);
- the error: predicted / measured - 1 (target: within 15%).

All "hosts" share this machine's cores: with 8 ranks on 2 cores each rank's
compute is slower than ``plan`` timed alone; ``--shared-cores`` tells ``plan`` so.

Writes bench/results/plan_validation.json and .md. Needs root (namespaces), sshd.

Usage: python bench/plan_validation.py [--rates 100mbit,250mbit] [--ranks 2,4,8]
       [--steps 6] [--batch-size 16]
       python bench/plan_validation.py --train ...   (what each rank runs)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
RESULTS = REPO / "bench" / "results"
MARKER = "PLAN-VALIDATION"
TARGET = 0.15


def make_model():  # type: ignore[no-untyped-def]
    """The job's model: an MLP of about 4.2M parameters (``plan --model`` calls it)."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )  # fmt: skip


def train(steps: int, batch_size: int, mode: str | None = None) -> None:
    """One rank of the DDP job; rank 0 prints the job's samples a second. With a
    ``mode`` (``bf16``, ``powersgd:4``, ``sync:8``) the model is wrapped by the
    runtime (``runtime.prepare(..., grad_compression=/sync_every=)``), and the
    mode's exact warm-up steps (``WARMUP_STEPS``) are run before the timed ones."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    warmup = 2
    if mode is None:
        dist.init_process_group("gloo")
        model = DistributedDataParallel(make_model())
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    else:
        from ringleader import runtime
        from ringleader.runtime.modes import WARMUP_STEPS

        runtime.init(backend="gloo")
        net = make_model()
        optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
        every = int(mode[5:]) if mode.startswith("sync:") else None
        model, optimizer = runtime.prepare(
            net, optimizer, grad_compression=None if every else mode, sync_every=every
        )
        warmup = WARMUP_STEPS + 2
    data = torch.randn(batch_size, 1024)
    target = torch.randint(0, 10, (batch_size,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    dist.barrier()
    times = []
    for _ in range(steps):  # DDP's all-reduce keeps the ranks in step
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    dist.barrier()
    ranks = dist.get_world_size()
    if dist.get_rank() == 0:
        median = statistics.median(times)  # a load spike of other programs moves one step
        # local SGD's steps differ by design (one in H averages): its mean over k x H steps
        typical = statistics.mean(times) if mode and mode.startswith("sync:") else median
        row = {"ranks": ranks, "steps": steps, "step_times": times, "seconds": sum(times),
               "median_step_s": typical, "samples_per_s": ranks * batch_size / typical}  # fmt: skip
        print(f"{MARKER} {json.dumps(row)}", flush=True)
    dist.destroy_process_group()


def mode_flags(mode: str | None) -> list[str]:
    """``plan``'s flags for a mode word (``sync:8`` is ``--sync-every 8``)."""
    if mode is None:
        return []
    if mode.startswith("sync:"):
        return ["--sync-every", mode[5:]]
    return ["--grad-compression", mode]


def predicted(batch_size: int, largest: int, link: list[str]) -> dict:
    """``ringleader plan --json`` for the job on ``link`` (``--link RATE`` or
    ``--hostfile FILE --ssh-config FILE``), run here (compute timed here)."""
    env = {**os.environ, "PYTHONPATH": f"{BENCH}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "ringleader", "plan", "--model", "plan_validation:make_model",
            "--batch-size", str(batch_size), "--threads", "1", *link,
            "--shared-cores", str(os.cpu_count() or 1),  # the hosts are namespaces of this one
            "--max-ranks", str(largest), "--json"]  # fmt: skip
    done = subprocess.run(argv, cwd=BENCH, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"plan {' '.join(link)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def measured(net, ranks: int, steps: int, batch_size: int, workdir: Path,  # type: ignore[no-untyped-def]
             mode: str | None = None) -> dict:  # fmt: skip
    """Launch the job on the first ``ranks`` hosts; rank 0's figures, plus load."""
    hostfile = workdir / f"hosts{ranks}.json"
    hosts = [{"ssh": h.address, "ips": [h.address]} for h in net.hosts[:ranks]]
    hostfile.write_text(json.dumps(hosts))
    argv = [sys.executable, "-m", "ringleader", "launch", "--hostfile", str(hostfile),
            "--ssh-config", str(net.ssh_config), "--no-prefix", "--", "python",
            str(BENCH / "plan_validation.py"), "--train", "--steps", str(steps),
            "--batch-size", str(batch_size), *(["--mode", mode] if mode else [])]  # fmt: skip
    load = os.getloadavg()[0]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            return {**json.loads(line[len(MARKER) :]), "load_before": load,
                    "load_after": os.getloadavg()[0]}  # fmt: skip
    raise RuntimeError(f"no result from {ranks} ranks: {done.stderr[-2000:]}")


def render(result: dict) -> str:
    how = result.get("statistic", "mean step")
    lines = [
        "# `ringleader plan` against measured DDP throughput",
        "",
        f"{result['params'] / 1e6:.2f}M-parameter MLP, batch {result['batch_size']} per rank,"
        f" gloo, one rank per netns test host (tc tbf on each veth), {result['steps']} timed"
        f" steps; compute timed by `plan` here: {result['compute_s'] * 1e3:.1f} ms a step."
        f" Machine: {result['machine']}. Target: within {TARGET:.0%}.",
        "",
        f"| link | N | predicted samples/s | measured samples/s ({how}) | error | bound | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['rate']} | {row['ranks']} | {row['predicted']:.1f} | {row['measured']:.1f}"
            f" | {row['error']:+.1%} | {row['bound']} | {row['load_before']:.2f} |"
        )
    measured_rows = [r for r in result["rows"] if "predicted_measured_link" in r]
    if measured_rows:
        lines += ["", "With the link `plan --hostfile` measured (doctor's gloo test between"
                  " each pair of neighbours, at the same rate):", "",
                  "| link | N | measured busbw | predicted samples/s | error |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for row in measured_rows:
            lines.append(
                f"| {row['rate']} | {row['ranks']} | {row['busbw_measured'] / 1e6:.1f} MB/s"
                f" | {row['predicted_measured_link']:.1f} | {row['error_measured_link']:+.1%} |"
            )
    lines.append("")
    for rate in dict.fromkeys(r["rate"] for r in result["rows"]):
        worst = max(abs(r["error"]) for r in result["rows"] if r["rate"] == rate)
        verdict = "met" if worst <= TARGET else "missed"
        lines.append(f"- {rate}: worst error {worst:.1%} ({verdict}).")
    if measured_rows:
        worst = max(abs(r["error_measured_link"]) for r in measured_rows)
        verdict = "met" if worst <= TARGET else "missed"
        lines.append(f"- with the measured link: worst error {worst:.1%} ({verdict}).")
    lines += ["", "Load: the 1-minute load average before each run (2 cores, shared);"
              " `plan` timed the compute under the same load, before the runs.",
              "Every rank shares this machine's cores: `plan` is told so (`--shared-cores"
              f" {result.get('cores', 2)} --threads 1`: N one-thread ranks on those cores"
              " compute max(1, N/cores) times slower than the one rank it timed)."]  # fmt: skip
    if result.get("modes"):
        lines += ["", render_modes(result["modes"])]
    return "\n".join(lines) + "\n"


def validate_modes(args, rates: list[str], ranks: list[int], network, link_rate) -> int:  # type: ignore[no-untyped-def]
    """Each mode's prediction (``plan --link RATE --grad-compression MODE``) against the
    job run with that mode through the runtime; ``none`` is plain DDP, the peer the
    modes' measured gains are taken against in the same run."""
    words = args.modes.split(",")
    modes = [None if w == "none" else w for w in words]
    plans: dict[tuple[str, str], dict] = {}
    rows = []
    with network(max(ranks)) as net, tempfile.TemporaryDirectory() as tmp:
        everyone = Path(tmp) / "hosts.json"
        everyone.write_text(json.dumps([{"ssh": h.address, "ips": [h.address]} for h in net.hosts]))
        link = ["--hostfile", str(everyone), "--ssh-config", str(net.ssh_config)]
        for rate in rates:
            link_rate.set_rate(net.hosts, link_rate.parse_rate(rate))
            for word, mode in zip(words, modes, strict=True):  # the link measured by plan
                plans[(rate, word)] = predicted(args.batch_size, max(ranks),
                                                [*link, *mode_flags(mode)])  # fmt: skip
            for n in ranks:
                for word, mode in zip(words, modes, strict=True):
                    steps = args.steps
                    if mode and mode.startswith("sync:"):  # whole periods of H
                        every = int(mode[5:])
                        steps = every * max(1, -(-steps // every))
                    got = measured(net, n, steps, args.batch_size, Path(tmp), mode)
                    guess = plans[(rate, word)]["predictions"][n - 1]
                    rows.append({
                        "rate": rate, "ranks": n, "mode": word,
                        "predicted": guess["samples_per_s"], "measured": got["samples_per_s"],
                        "error": guess["samples_per_s"] / got["samples_per_s"] - 1,
                        "bound": guess["bound"], "predicted_step_s": guess["step_s"],
                        "measured_step_s": got["median_step_s"], "steps": steps,
                        "step_times": got["step_times"], "load_before": got["load_before"],
                        "load_after": got["load_after"],
                    })  # fmt: skip
                    print(json.dumps({k: v for k, v in rows[-1].items() if k != "step_times"}),
                          flush=True)  # fmt: skip
    path = RESULTS / "plan_validation.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    first = plans[(rates[0], words[0])]
    result.setdefault("params", first["inputs"]["params"])
    result.setdefault("rows", [])
    earlier = result.get("modes") or {}
    # Rows of modes (and rates) this run did not measure are kept: one mode can be rerun.
    kept = [r for r in earlier.get("rows", []) if (r["rate"], r["mode"]) not in plans]
    rows = sorted(kept + rows, key=lambda r: (r["rate"], r["ranks"], _mode_order(r["mode"])))
    result["modes"] = {
        "batch_size": args.batch_size, "compute_s": first["inputs"]["compute_s"],
        "rows": rows, "advice": {**earlier.get("advice", {}),
                                 **{f"{r} {w}": p.get("recommendation")
                                    for (r, w), p in plans.items() if w == "none"}},
        "mode_inputs": {**earlier.get("mode_inputs", {}),
                        **{f"{r} {w}": {**p["inputs"], "mode": p["source"].get("mode")}
                           for (r, w), p in plans.items()}},
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}",
        "cores": os.cpu_count(),
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "plan_validation.md").write_text(render(result))
    print(render_modes(result["modes"]))
    return 0


def _mode_order(word: str) -> tuple[int, str]:
    """Rows in a fixed order: exact DDP, then compression, then local SGD."""
    return (0 if word == "none" else 2 if word.startswith("sync:") else 1, word)


def render_modes(modes: dict) -> str:
    """The modes' table: predicted against measured, and each mode's gain over plain
    DDP measured in the same run (the peer) against the gain predicted."""
    exact = {(r["rate"], r["ranks"]): r for r in modes["rows"] if r["mode"] == "none"}
    lines = [
        "## Communication modes",
        "",
        f"The same MLP, batch {modes['batch_size']} per rank, each mode through"
        " `runtime.prepare(..., grad_compression=/sync_every=)` after its exact warm-up"
        " steps; predicted by `ringleader plan --hostfile HOSTS --shared-cores"
        f" {modes.get('cores') or 2} --threads 1 --grad-compression MODE` (the link and a"
        " hop's latency at 2, 4 and 8 ranks measured by `plan` at that rate; PowerSGD's"
        " step timed by `plan` under torch's hook on a world of one). `none` is plain DDP,"
        " run in the same session: the"
        " peer for the gains.",
        "",
        "| link | N | mode | predicted samples/s | measured samples/s | error"
        " | gain predicted | gain measured | step predicted | step measured | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    cores = modes.get("cores") or 2
    for row in modes["rows"]:
        peer = exact.get((row["rate"], row["ranks"]))
        gains = ("-", "-")
        if peer and row["mode"] != "none":
            gains = (f"{row['predicted'] / peer['predicted']:.2f}x",
                     f"{row['measured'] / peer['measured']:.2f}x")  # fmt: skip
        lines.append(
            f"| {row['rate']} | {row['ranks']} | {row['mode']} | {row['predicted']:.1f}"
            f" | {row['measured']:.1f} | {row['error']:+.1%} | {gains[0]} | {gains[1]}"
            f" | {row['predicted_step_s'] * 1e3:.0f} ms | {row['measured_step_s'] * 1e3:.0f} ms"
            f" | {row['load_before']:.1f} |"
        )
    lines.append("")
    for rate in dict.fromkeys(r["rate"] for r in modes["rows"]):
        for word in sorted({r["mode"] for r in modes["rows"]}, key=_mode_order):
            errors = [abs(r["error"]) for r in modes["rows"]
                      if r["rate"] == rate and r["mode"] == word]  # fmt: skip
            if errors:
                worst = max(errors)
                lines.append(f"- {rate} {word}: worst error {worst:.1%}"
                             f" ({'met' if worst <= TARGET else 'missed'}).")  # fmt: skip
    lines += ["", f"Target {TARGET:.0%}. Samples/s at the median step (local SGD's `sync:H`:"
              " the mean over whole periods). Load: the 1-minute load average before"
              f" each run ({cores} cores, shared). Where a mode makes the step compute-bound"
              " (powersgd here: 0.76% of the bytes), the ranks' shared cores and the"
              " latency of PowerSGD's 3 small all-reduces a bucket set the step: `plan`"
              " stretches the compute by N/cores and takes each width's hop as"
              " measured."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rates", default="100mbit,250mbit")
    parser.add_argument("--ranks", default="2,4,8")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--render", action="store_true", help="the markdown again")
    parser.add_argument("--mode", default=None, help=argparse.SUPPRESS)  # --train's
    parser.add_argument(
        "--modes", default=None,
        help="validate these modes instead (none, bf16, fp16, powersgd:R, sync:H; e.g."
        " none,bf16,powersgd:4): their rows are merged into the results' mode_rows",
    )  # fmt: skip
    parser.add_argument(
        "--no-measured-link", dest="measured_link", action="store_false",
        help="skip the second prediction, from the link plan --hostfile measures",
    )  # fmt: skip
    args = parser.parse_args()
    if args.train:
        train(args.steps, args.batch_size, args.mode)
        return 0
    if args.render:
        result = json.loads((RESULTS / "plan_validation.json").read_text())
        (RESULTS / "plan_validation.md").write_text(render(result))
        return 0
    sys.path.insert(0, str(REPO))
    from tests.fixtures.testhosts import TestHostNetwork, missing_prerequisites

    from ringleader.cluster.testhosts import rate as link_rate

    if missing_prerequisites():
        print("needs test hosts:", "; ".join(missing_prerequisites()), file=sys.stderr)
        return 1
    rates = args.rates.split(",")
    ranks = [int(n) for n in args.ranks.split(",")]
    if args.modes:
        return validate_modes(args, rates, ranks, TestHostNetwork, link_rate)
    rows = []
    plans = {rate: predicted(args.batch_size, max(ranks), ["--link", rate]) for rate in rates}
    by_hosts: dict[str, dict] = {}
    with TestHostNetwork(max(ranks)) as net, tempfile.TemporaryDirectory() as tmp:
        everyone = Path(tmp) / "hosts.json"
        everyone.write_text(json.dumps([{"ssh": h.address, "ips": [h.address]} for h in net.hosts]))
        for rate in rates:
            link_rate.set_rate(net.hosts, link_rate.parse_rate(rate))
            if args.measured_link:  # plan measures the ring's pairs itself
                link = ["--hostfile", str(everyone), "--ssh-config", str(net.ssh_config)]
                by_hosts[rate] = predicted(args.batch_size, max(ranks), link)
            for n in ranks:
                got = measured(net, n, args.steps, args.batch_size, Path(tmp))
                guess = plans[rate]["predictions"][n - 1]
                rows.append({
                    "rate": rate, "ranks": n, "predicted": guess["samples_per_s"],
                    "measured": got["samples_per_s"], "bound": guess["bound"],
                    "error": guess["samples_per_s"] / got["samples_per_s"] - 1,
                    "predicted_step_s": guess["step_s"], "measured_step_s":
                    got["median_step_s"], "load_before": got["load_before"],
                    "load_after": got["load_after"],
                })  # fmt: skip
                if rate in by_hosts:
                    hosts_guess = by_hosts[rate]["predictions"][n - 1]["samples_per_s"]
                    rows[-1]["predicted_measured_link"] = hosts_guess
                    rows[-1]["error_measured_link"] = hosts_guess / got["samples_per_s"] - 1
                    rows[-1]["busbw_measured"] = by_hosts[rate]["inputs"]["busbw"]
                print(json.dumps(rows[-1]), flush=True)
    inputs = plans[rates[0]]["inputs"]
    result = {
        "params": inputs["params"], "batch_size": args.batch_size, "steps": args.steps,
        "compute_s": inputs["compute_s"], "plans": plans, "rows": rows, "by_hosts": by_hosts,
        "statistic": "median step", "cores": os.cpu_count(),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}",
    }  # fmt: skip
    path = RESULTS / "plan_validation.json"
    if path.exists() and "modes" in (earlier := json.loads(path.read_text())):
        result["modes"] = earlier["modes"]  # --modes' rows, measured apart
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "plan_validation.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
