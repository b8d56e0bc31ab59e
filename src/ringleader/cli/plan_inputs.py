"""``ringleader plan``'s inputs from its flags: every flag checked, then the model's
compute and the link, measured here or taken as given.

Kept apart from ``cli/plan.py`` (the command: its options, the modes it predicts,
the table, chart and JSON it prints) because this is where the flags meet the
outside world: each error names its flag and comes before anything runs; only then
is ``--script``/``--module`` run as one rank, ``--model`` timed here or the hosts of
``--hostfile`` measured (``ringleader.planner.measure``), and the result is the
``ringleader.planner.model.Inputs`` the arithmetic takes, with ``source``, a record
of where each figure came from (the table's and the JSON's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ringleader.cli.cluster import pick_host_list
from ringleader.errors import InvalidSpec

DEFAULT_LATENCY = "100us"


def _parsed(parse: Any, text: str, flag: str) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise InvalidSpec(str(exc), flag) from None


def planner_inputs(
    model: str | None, params: str | None, dtype: str, step_time: str | None,
    batch_size: int | None, input_shape: str | None, threads: int | None, link: str | None,
    hostfile: str | None, ssh_config: str | None, latency: str | None,
    run_script: Callable[[], Any] | None = None,
) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """The model's inputs from the flags, every flag checked before anything is run."""
    from ringleader.cluster.testhosts.rate import parse_rate
    from ringleader.planner import model as arithmetic
    from ringleader.planner import units

    if run_script is None and (model is None) == (params is None):
        raise InvalidSpec("give the model as --model MODULE:FACTORY, --script FILE, --module"
                          " NAME or --params COUNT (one of them)", "--model")  # fmt: skip
    if (link is None) == (hostfile is None):
        raise InvalidSpec("give the link as --link RATE or --hostfile FILE (one of them)",
                          "--link")  # fmt: skip
    if params is not None and step_time is None:
        raise InvalidSpec("with --params the compute time cannot be measured: give it,"
                          " e.g. --step-time 120ms", "--step-time")  # fmt: skip
    if dtype.lower() not in arithmetic.DTYPE_BYTES:
        raise InvalidSpec(f"{dtype!r}: one of {', '.join(arithmetic.DTYPE_BYTES)}", "--dtype")
    count = _parsed(units.parse_count, params, "--params") if params else 0
    step_s = _parsed(units.parse_duration, step_time, "--step-time") if step_time else None
    shape = _parsed(units.parse_shape, input_shape, "--input-shape") if input_shape else None
    hop_s = _parsed(units.parse_duration, latency, "--latency") if latency else None
    bits = _parsed(parse_rate, link, "--link") if link else None
    if link is not None and bits is None:
        raise InvalidSpec(f"{link!r}: the planner needs a rate, e.g. 10gbit", "--link")
    picked = pick_host_list(None, hostfile) if hostfile else []
    source: dict[str, Any] = {"hosts": [h.ssh for h in picked]}
    learnt = run_script() if run_script is not None else None
    if batch_size is None:
        batch_size = learnt.samples if learnt is not None and learnt.samples else 32
    if model is not None:
        from ringleader.planner import measure

        timed = measure.measure_compute(
            measure.load_factory(model), batch_size, shape, threads=threads
        )
        count, size = timed.params, timed.dtype_bytes
        fwd, bwd, other = timed.forward_s, timed.backward_s, timed.other_s
        source["compute"] = "measured here" if step_s is None else "--step-time"
        source["measured_compute"] = timed.figures()
        source["shapes"] = [list(shape) for shape in timed.shapes]
    elif learnt is not None:
        count, size = learnt.params, learnt.dtype_bytes
        compute = learnt.step_s if step_s is None else step_s
        bwd = compute * arithmetic.BACKWARD_SHARE
        fwd, other = compute - bwd, 0.0
        source["compute"] = "measured running the script" if step_s is None else "--step-time"
        source["measured_compute"] = {"step_s": learnt.step_s, "steps": learnt.steps,
                                      "samples": learnt.samples, "dtype": learnt.dtype}  # fmt: skip
        source["shapes"] = [list(shape) for shape in learnt.shapes]
    else:
        size = arithmetic.DTYPE_BYTES[dtype.lower()]
        fwd = bwd = other = 0.0
        source["compute"] = "--step-time"
    if step_s is not None:  # given: split as backward twice forward
        bwd = step_s * arithmetic.BACKWARD_SHARE
        fwd, other = step_s - bwd, 0.0
    hops: tuple[tuple[int, float], ...] = ()
    if bits is not None:
        busbw, hop = bits / 8 * arithmetic.TCP_PAYLOAD, hop_s
        source["link"] = f"--link {link}"
    else:
        from ringleader.planner import measure

        hosts = [(h.ssh, h.address) for h in picked]
        measured = measure.measure_link(hosts, ssh_config)
        busbw, hop = measured.busbw, hop_s if hop_s is not None else measured.latency_s
        source["link"] = f"measured between {len(picked)} hosts"
        source["pairs"] = measured.pairs
        if hop_s is None:  # --latency given overrides every width's
            hops = measured.hops
            source["hops"] = [{"ranks": n, "latency_s": t} for n, t in hops]
    inputs = arithmetic.Inputs(
        params=count, dtype_bytes=size, forward_s=fwd, backward_s=bwd, other_s=other,
        busbw=busbw, batch_size=batch_size, hop_latencies=hops,
        latency_s=hop if hop is not None else units.parse_duration(DEFAULT_LATENCY),
    )  # fmt: skip
    source["title"] = f"{count / 1e6:.3g}M params, {source['link']}"
    return inputs, source


def script_run(
    script: str | None, module: str | None, args: list[str], steps: int, timeout: str,
    model: str | None, params: str | None,
) -> Callable[[], Any] | None:  # fmt: skip
    """Running ``--script`` (or ``--module``) as one rank, once every flag is checked
    (None without either); the other ways of giving the model are refused beside it."""
    from ringleader.planner import units

    if script is None and module is None:
        if args:
            raise InvalidSpec(f"{args[0]!r}: arguments are the script's: give --script FILE",
                              "--script")  # fmt: skip
        return None
    flag = "--script" if script is not None else "--module"
    if model is not None or params is not None or (script is not None and module is not None):
        raise InvalidSpec("give the model as --script, --module, --model or --params (one of"
                          " them)", flag)  # fmt: skip
    limit = _parsed(units.parse_duration, timeout, "--script-timeout")
    from ringleader.planner.script import check_module, learn

    if script is not None:
        if not Path(script).is_file():
            raise InvalidSpec(f"{script!r}: no such file", "--script")
        return lambda: learn(script, args, steps, limit)
    assert module is not None
    check_module(module)
    return lambda: learn(module, args, steps, limit, module=True)


def with_shared_cores(
    inputs: Any, cores: float | None, threads: int | None, source: dict[str, Any]
) -> Any:
    """The inputs with the ranks sharing ``cores`` (``--shared-cores``), each rank of
    ``--threads`` threads, else of the threads the compute was timed with (1 when
    it was given, not timed)."""
    from dataclasses import replace

    if cores is None:
        return inputs
    if threads is None:
        threads = int(source.get("measured_compute", {}).get("threads", 1))
    source["shared"] = f"ranks of {threads} thread(s) share {cores:g} cores"
    return replace(inputs, shared_cores=cores, threads=threads)
