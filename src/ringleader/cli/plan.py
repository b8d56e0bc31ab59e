"""``ringleader plan``: the scaling planner's flags, its table, chart and JSON.

The arithmetic is ``ringleader.planner.model``; the measurements (the model's
compute here, the hosts' link) ``ringleader.planner.measure``. This module declares
the flags, checks the mode and chart ones (each error names its flag), predicts and
prints; turning the model and link flags into the planner's inputs (checking them,
then running, timing or measuring) is ``cli/plan_inputs.py``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ringleader.cli.cluster import SSH_CONFIG_HELP
from ringleader.cli.common import console, reports_errors
from ringleader.cli.plan_inputs import (
    DEFAULT_LATENCY,
    planner_inputs,
    script_run,
    with_shared_cores,
)
from ringleader.errors import InvalidSpec


@reports_errors
def plan(
    model: str = typer.Option(
        None, "--model", metavar="MODULE:FACTORY",
        help="A function returning the torch.nn.Module to time here (e.g. mymodels:net).",
    ),
    script: str = typer.Option(
        None, "--script", metavar="FILE",
        help="Instead of --model: a training script using ringleader.runtime, run here"
        " as one rank (its own arguments after --) until it has reported --steps steps.",
    ),
    module: str = typer.Option(
        None, "--module", metavar="NAME",
        help="Instead of --script: a training module, run as python -m NAME.",
    ),
    steps: int = typer.Option(
        10, "--steps", metavar="N", min=2, max=10000,
        help="With --script/--module: the steps timed (after 2 to warm up).",
    ),
    script_timeout: str = typer.Option(
        "300s", "--script-timeout", metavar="TIME",
        help="With --script: stop it after this long, whatever it reported.",
    ),
    params: str = typer.Option(
        None, "--params", metavar="COUNT",
        help="Instead of --model: the parameter count, e.g. 25M, 1.5B (needs --step-time).",
    ),
    dtype: str = typer.Option(
        "fp32", "--dtype", metavar="DTYPE", help="With --params: fp32, bf16, fp16 or fp64."
    ),
    step_time: str = typer.Option(
        None, "--step-time", metavar="TIME",
        help="One rank's compute per step, e.g. 120ms (default with --model: measured).",
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", metavar="N", min=1,
        help="Samples per rank per step (default: what --script reported, else 32).",
    ),
    input_shape: str = typer.Option(
        None, "--input-shape", metavar="SHAPE",
        help="One sample's shape for --model, e.g. 3,32,32 (default: the first Linear's).",
    ),
    threads: int = typer.Option(
        None, "--threads", metavar="N", min=1,
        help="Torch threads while timing --model (as many as each rank will have).",
    ),
    shared_cores: float = typer.Option(
        None, "--shared-cores", metavar="C", min=0.1, max=100000,
        help="All ranks share one machine of C cores (ranks on one box, or test hosts"
        " that are namespaces of one machine): each computes slower once their threads"
        " exceed C.",
    ),
    link: str = typer.Option(
        None, "--link", metavar="RATE",
        help="The hosts' link, each way: 10gbit, 100mbit (wire rate; TCP carries ~94%).",
    ),
    hostfile: str = typer.Option(
        None, "--hostfile", metavar="FILE",
        help="Instead of --link: the hosts (hosts.json or an MPI hostfile); each"
        " neighbouring pair's bus bandwidth is measured (doctor's gloo test).",
    ),
    ssh_config: str = typer.Option(None, "--ssh-config", metavar="FILE", help=SSH_CONFIG_HELP),
    latency: str = typer.Option(
        None, "--latency", metavar="TIME",
        help=f"Per ring hop, e.g. 50us (default: measured with --hostfile, else"
        f" {DEFAULT_LATENCY}).",
    ),
    max_ranks: int = typer.Option(
        None, "--max-ranks", metavar="N", min=1, max=4096,
        help="Predict N = 1..this (default: the hostfile's hosts, else 8).",
    ),
    knee_at: float = typer.Option(
        0.8, "--knee-efficiency", metavar="FRACTION", min=0.01, max=1.0,
        help="The efficiency below which adding ranks stops paying (the knee).",
    ),
    grad_compression: str = typer.Option(
        None, "--grad-compression", metavar="MODE",
        help="Predict with this mode, as launch's: bf16, fp16, powersgd[:RANK].",
    ),
    sync_every: int = typer.Option(
        None, "--sync-every", metavar="H",
        help="Predict local SGD: parameters averaged every H steps (as launch's).",
    ),
    plot_file: str = typer.Option(
        None, "--plot", metavar="FILE", help="Also draw the curves to FILE.svg or FILE.png."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document (scripts)."),
    script_args: list[str] = typer.Argument(
        None, metavar="SCRIPT_ARGS", show_default=False,
        help="With --script: the script's own arguments, after --.",
    ),
) -> None:  # fmt: skip
    """Predict step time, throughput and efficiency for 1..N ranks on a link.

    Data-parallel training: each rank computes a batch, then a ring all-reduce
    sends 2(N-1)/N of the gradient bytes each way per rank, overlapped with
    backward in DDP's buckets. From the compute per step (timed here for
    --model; for --script, the script's own steps, run here as one rank
    until runtime.report has counted --steps) and the link (--link, or
    measured between --hostfile's hosts) it predicts each N, says where
    efficiency falls below --knee-efficiency and whether compute or
    communication bounds the step there. When communication bounds it, it
    says which --grad-compression mode to try and its predicted throughput;
    --grad-compression/--sync-every predict a mode.

    Examples:

      ringleader plan --params 25M --step-time 120ms --link 10gbit

      ringleader plan --model mymodels:mlp --batch-size 64 --link 1gbit

      ringleader plan --model mymodels:mlp --hostfile hosts.json --plot s.svg

      ringleader plan --model mymodels:cnn --input-shape 3,32,32 --link 1gbit

      ringleader plan --params 25M --step-time 1s --link 1gbit --sync-every 8

      ringleader plan --model mymodels:mlp --link 1gbit --grad-compression bf16

      ringleader plan --script train.py --link 1gbit -- --batch-size 64

      ringleader plan --module mypkg.train --link 1gbit -- --epochs 1
    """
    from ringleader.planner import model as arithmetic
    from ringleader.planner import modes as planned

    mode = _mode(grad_compression, sync_every)
    plot_path = _plot_path(plot_file)
    run_script = script_run(script, module, script_args or [], steps, script_timeout, model,
                            params)  # fmt: skip
    exact, source = planner_inputs(model, params, dtype, step_time, batch_size, input_shape,
                                   threads, link, hostfile, ssh_config, latency,
                                   run_script)  # fmt: skip
    exact = with_shared_cores(exact, shared_cores, threads, source)
    largest = max_ranks or (len(source["hosts"]) if source.get("hosts") else 8)
    single = arithmetic.predict(exact, 1).step_s
    inputs, advice = exact, None
    timer = _mode_timer(model, exact.batch_size, input_shape, threads)
    if not mode.exact:
        cost = _cost(mode, exact, source, timer)
        inputs = planned.apply(exact, cost)
        source["mode"] = vars(cost) | {"mode": cost.name}
    predictions = arithmetic.predict_all(inputs, range(1, largest + 1), single)
    found = arithmetic.knee(predictions, inputs, knee_at)
    if mode.exact and planned.bound_at(predictions, found.ranks) is not None:
        # only a communication-bound job is advised: PowerSGD's step is timed just then
        costs = [_cost(make, exact, source, timer) for make in map(_mode_of, planned.RECOMMENDED)]
        advice = planned.advise(exact, predictions, found.ranks, costs)
    if plot_path is not None:
        from ringleader.planner.chart import plot

        plot(predictions, found, plot_path, source["title"])
    if as_json:
        body = {**arithmetic.to_json(inputs, predictions, found), "source": source,
                "recommendation": advice}  # fmt: skip
        print(json.dumps(body, indent=2))
        return
    _table(inputs, predictions, source)
    console.print(found.why, markup=False, highlight=False)
    if advice is not None:
        console.print(planned.advice_text(advice), markup=False, highlight=False)
    if plot_path is not None:
        console.print(f"Chart: {plot_path}", markup=False, highlight=False, soft_wrap=True)


def _mode_of(word: str) -> Any:
    from ringleader.runtime.modes import make_mode

    return make_mode(word)


def _mode(compression: str | None, sync_every: int | None) -> Any:
    """The mode to predict, checked by the runtime's own parser (launch's words)."""
    from ringleader.runtime.modes import make_mode

    try:
        return make_mode(compression, sync_every)
    except ValueError as exc:
        where, problem = exc.args
        raise InvalidSpec(problem, f"--{where.replace('_', '-')}") from None


def _cost(
    mode: Any, exact: Any, source: dict[str, Any], timer: Callable[[Any], float] | None = None
) -> Any:
    """``mode``'s bytes factor from the model's shapes (``--model``) or assumed, and
    PowerSGD's own compute: with ``--model`` (``timer``) its whole step timed here in
    DDP with torch's hook on a world of one, less the plain step timed here; else,
    shapes known (``--script``), its arithmetic alone."""
    from ringleader.planner import modes as planned

    shapes = source.get("shapes")
    extra = 0.0
    if mode.compression == "powersgd" and timer is not None:
        timed = source["measured_compute"]  # the plain step, timed the same way here
        plain = timed["forward_s"] + timed["backward_s"] + timed["other_s"]
        extra = max(0.0, timer(mode) - plain)
    elif mode.compression == "powersgd" and shapes:
        extra = planned.powersgd_compute_s(shapes, mode.rank)
    return planned.cost(mode, exact.dtype_bytes, shapes, extra)


def _mode_timer(
    model: str | None, batch_size: int, input_shape: str | None, threads: int | None
) -> Callable[[Any], float] | None:
    """With ``--model``: a mode's whole step, timed here (``measure.mode_step_s``)."""
    if model is None:
        return None
    from ringleader.planner import measure, units

    shape = units.parse_shape(input_shape) if input_shape else None
    return lambda mode: measure.mode_step_s(
        measure.load_factory(model), batch_size, mode, shape, threads=threads
    )


def _plot_path(text: str | None) -> Path | None:
    from ringleader.planner.chart import FORMATS

    if text is None:
        return None
    path = Path(text)
    if path.suffix.lower() not in FORMATS:
        raise InvalidSpec(f"{text!r}: the chart is written as .svg or .png", "--plot")
    if not path.parent.is_dir():
        raise InvalidSpec(f"{text!r}: no directory {path.parent}", "--plot")
    if importlib.util.find_spec("matplotlib") is None:
        raise InvalidSpec("the chart needs matplotlib, which is not installed here"
                          "\n  fix: pip install 'ringleader[plot]'", "--plot")  # fmt: skip
    return path


def _table(inputs: Any, predictions: list[Any], source: dict[str, Any]) -> None:
    from ringleader.cluster.busbw import duration_text, rate_text
    from ringleader.planner.model import ranks_shown

    say = console.print
    say(
        f"{inputs.params / 1e6:.3g}M parameters, {inputs.grad_bytes / 1e6:.3g} MB of"
        f" gradients a step; compute {duration_text(inputs.compute_s)} a step"
        f" ({source['compute']}); link {rate_text(inputs.busbw)} bus bandwidth,"
        f" {duration_text(inputs.latency_s)} a hop ({source['link']})",
        markup=False, highlight=False,
    )  # fmt: skip
    if len(source.get("hops", [])) > 1:
        at = ", ".join(f"{duration_text(h['latency_s'])} on {h['ranks']}" for h in source["hops"])
        say(f"A hop, measured by width: {at} ranks", markup=False, highlight=False)
    if "shared" in source:
        say(f"Shared machine: {source['shared']} (compute stretched once they exceed them)",
            markup=False, highlight=False)  # fmt: skip
    if "mode" in source:
        mode = source["mode"]
        own = mode["extra_compute_s"]
        timed = f", {duration_text(own)} of its own compute a step" if own else ""
        say(f"Mode {mode['mode']}: bytes x{mode['bytes_factor']:.3g} ({mode['note']}){timed};"
            f" {mode['caveat']}", markup=False, highlight=False)  # fmt: skip
    table = Table("N", "STEP", "COMPUTE", "ALLREDUCE", "WAIT", "SAMPLES/S", "EFF", "BOUND",
                  box=None, pad_edge=False)  # fmt: skip
    shown = set(ranks_shown(len(predictions)))
    for p in predictions:
        if p.ranks in shown:
            table.add_row(
                str(p.ranks), duration_text(p.step_s), duration_text(p.compute_s),
                duration_text(p.comm_s) if p.ranks > 1 else "-",
                duration_text(p.exposed_s) if p.ranks > 1 else "-",
                f"{p.samples_per_s:,.0f}" if p.samples_per_s >= 100 else f"{p.samples_per_s:.3g}",
                f"{p.efficiency:.0%}", "comm" if p.bound == "communication" else "compute",
            )  # fmt: skip
    say(table)
