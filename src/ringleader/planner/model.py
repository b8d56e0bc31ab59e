"""The scaling planner's arithmetic: one data-parallel step on N ranks, predicted.

Why a model this small: a user asks "how much faster with N hosts, and is the
network the limit?" before renting them. Three measured figures answer it: the
compute time of one step, the gradient bytes, and the link's bus bandwidth; the
rest is ring all-reduce's cost and how DDP overlaps it with backward.

The model (``docs/planning.md`` works an example by hand):

* compute ``C = fwd + bwd + other`` per step, the same on every rank (each rank
  does the work of one batch; N ranks do N batches a step);
* gradient bytes ``K = params x bytes per element x factor`` (``factor`` < 1 for
  a compressed all-reduce: the hook for compression modes, ``with_bytes_factor``);
* DDP buckets (``bucket_sizes``) are cut from the uncompressed gradient ``G = params
  x bytes per element``: the first 1 MiB, then up to 25 MiB each, in the order
  backward produces them, each sent as ``factor`` of its bytes; backward produces
  bytes at an even rate, so bucket ``i`` is ready at ``fwd + bwd x (bytes up to and
  including i) / G``;
* one bucket's ring all-reduce on N ranks takes ``2(N-1)/N x b / busbw +
  2(N-1) x latency`` (each rank sends 2(N-1)b/N bytes in 2(N-1) steps);
* the link carries one bucket at a time, each starting when it is ready and the
  previous one is done; the step ends when both backward and the last bucket are
  done, then ``other`` (the optimizer) runs: ``step = max(fwd + bwd, end of last
  bucket) + other``;
* throughput ``N x batch / step``; efficiency ``step(1) / step(N)`` (the fraction
  of N times one rank's throughput);
* local SGD (``sync_every`` H > 1): no gradient buckets; the parameters' bytes are
  all-reduced in one buffer every H steps after the optimizer, nothing overlapping
  it: ``step = compute + allreduce(K) / H`` on average;
* a hop's latency is ``latency_s``, or, where it was measured at several widths
  (``hop_latencies``: the doctor's small all-reduce on the first N hosts), the
  figure at N (linear between measured widths, the nearest beyond them): on hosts
  whose cores are shared, a hop waits for its process to be scheduled, which grows
  with N;
* a mode may send ``collectives`` all-reduces per bucket (PowerSGD: 3, the
  uncompressed tensors, P and Q), each paying the hops' latency, and may not
  overlap backward (``overlap`` False: PowerSGD compresses a bucket, sends it and
  decompresses it in turn, one bucket after another on gloo): the buckets are
  then sent after backward;
* ranks that share one machine (``shared_cores``: several ranks on one box, or test
  hosts that are network namespaces of one machine) share its cores: N ranks of T
  threads on C cores stretch every rank's compute by ``max(1, N x T / C)`` (the
  compute was timed with T threads and the machine to itself).  Without it each rank
  is planned on a machine of its own.

A step is *communication-bound* when the link's busy time (the sum of the buckets'
all-reduce times) exceeds backward's, the time that can hide it: more bandwidth
would then shorten the step, more compute would not.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace

MIB = 2**20
FIRST_BUCKET = 1 * MIB  # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES
BUCKET_CAP = 25 * MIB  # DDP's bucket_cap_mb default
BACKWARD_SHARE = 2 / 3  # backward is about twice forward: used when only a step time is known
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8}
# Payload share of a TCP/IPv4 link at MTU 1500: 1448 bytes of data per 1538 on the wire
# (Ethernet framing, IP and TCP headers with timestamps); ``--link`` is the wire's rate.
TCP_PAYLOAD = 1448 / 1538


@dataclass(frozen=True)
class Inputs:
    """What a prediction is made from (seconds, bytes, bytes a second)."""

    params: int
    dtype_bytes: int
    forward_s: float
    backward_s: float
    other_s: float
    busbw: float  # bytes/s the link carries each way, payload (what busbw measures)
    latency_s: float  # per ring step (one hop of one all-reduce)
    batch_size: int = 1
    bytes_factor: float = 1.0  # 1.0 exact; a compression mode's share of the bytes
    sync_every: int = 1  # local SGD: the parameters averaged every H steps instead
    shared_cores: float | None = None  # all ranks on one machine of this many cores
    hop_latencies: tuple[tuple[int, float], ...] = ()  # (width N, s a hop), measured
    collectives: int = 1  # all-reduces per bucket (PowerSGD: 3)
    overlap: bool = True  # buckets sent while backward runs (PowerSGD on gloo: not)
    threads: int = 1  # each rank's compute threads (with shared_cores)
    first_bucket: int = FIRST_BUCKET
    bucket_cap: int = BUCKET_CAP

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s + self.other_s

    @property
    def grad_bytes(self) -> float:
        return self.params * self.dtype_bytes * self.bytes_factor


@dataclass(frozen=True)
class Prediction:
    """One N's predicted step."""

    ranks: int
    step_s: float
    compute_s: float
    comm_s: float  # the link's busy time: every bucket's all-reduce
    exposed_s: float  # what the step waits on the network: step - compute
    samples_per_s: float
    speedup: float
    efficiency: float
    bound: str  # "compute" or "communication"


def bucket_sizes(total: float, first: int = FIRST_BUCKET, cap: int = BUCKET_CAP) -> list[float]:
    """The all-reduce buckets of ``total`` gradient bytes, in the order they are sent.

    DDP fills buckets in reverse parameter order (backward's order), the first
    capped at 1 MiB so communication starts early, the others at 25 MiB.
    """
    if total <= 0:
        return []
    sizes = [min(float(first), total)]
    rest = total - sizes[0]
    while rest > 1e-9:
        sizes.append(min(float(cap), rest))
        rest -= sizes[-1]
    return sizes


def allreduce_s(
    nbytes: float, ranks: int, busbw: float, latency_s: float, collectives: int = 1
) -> float:
    """A ring all-reduce of ``nbytes`` on ``ranks``: 2(N-1)/N x b / busbw + 2(N-1) hops,
    the hops paid by each of ``collectives`` all-reduces that share the bytes."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * nbytes / busbw + 2 * (ranks - 1) * latency_s * collectives


def hop_latency(inputs: Inputs, ranks: int) -> float:
    """A hop's latency on ``ranks`` ranks: measured at that width, linear between two
    measured widths, the nearest measured one outside them; else ``latency_s``."""
    if not inputs.hop_latencies:
        return inputs.latency_s
    points = sorted(inputs.hop_latencies)
    if ranks <= points[0][0]:
        return points[0][1]
    for (n0, s0), (n1, s1) in itertools.pairwise(points):
        if ranks <= n1:
            return s0 + (s1 - s0) * (ranks - n0) / (n1 - n0)
    return points[-1][1]


def contention(inputs: Inputs, ranks: int) -> float:
    """How much slower each rank computes when ``ranks`` ranks share the machine's
    cores (``shared_cores``): their threads over the cores, at least 1."""
    if inputs.shared_cores is None:
        return 1.0
    return max(1.0, ranks * inputs.threads / inputs.shared_cores)


def predict(inputs: Inputs, ranks: int, single_step_s: float | None = None) -> Prediction:
    """The step on ``ranks`` ranks (see the module docstring for the model)."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    stretch = contention(inputs, ranks)
    if stretch > 1:
        inputs = replace(inputs, forward_s=inputs.forward_s * stretch,
                         backward_s=inputs.backward_s * stretch,
                         other_s=inputs.other_s * stretch)  # fmt: skip
    compute = inputs.compute_s
    backward_end = inputs.forward_s + inputs.backward_s
    total = inputs.grad_bytes
    link_free = 0.0
    comm = 0.0
    done = 0.0
    if ranks > 1 and inputs.sync_every > 1:  # local SGD: one flat all-reduce every H steps,
        # after the optimizer (nothing overlaps it), averaged over the H steps
        hop = hop_latency(inputs, ranks)
        comm = allreduce_s(total, ranks, inputs.busbw, hop) / inputs.sync_every
        link_free = compute - inputs.other_s + comm
    elif ranks > 1:
        hop = hop_latency(inputs, ranks)
        raw = inputs.params * inputs.dtype_bytes  # DDP cuts buckets before a hook compresses
        for size in bucket_sizes(raw, inputs.first_bucket, inputs.bucket_cap):
            done += size
            ready = inputs.forward_s + inputs.backward_s * done / raw
            if not inputs.overlap:  # sent in turn once backward has ended
                ready = backward_end
            sent = size * inputs.bytes_factor
            busy = allreduce_s(sent, ranks, inputs.busbw, hop, inputs.collectives)
            link_free = max(ready, link_free) + busy
            comm += busy
    step = max(backward_end, link_free) + inputs.other_s
    single = compute if single_step_s is None else single_step_s
    speedup = ranks * single / step
    return Prediction(
        ranks=ranks,
        step_s=step,
        compute_s=compute,
        comm_s=comm,
        exposed_s=step - compute,
        samples_per_s=ranks * inputs.batch_size / step,
        speedup=speedup,
        efficiency=speedup / ranks,
        bound="communication"
        if comm > (inputs.backward_s if inputs.overlap else compute)
        else "compute",
    )


def predict_all(
    inputs: Inputs, ranks: Iterable[int], single_step_s: float | None = None
) -> list[Prediction]:
    """Each N's step; speedup and efficiency against ``single_step_s`` (default: one
    rank of this job; a mode's plan passes the exact job's)."""
    single = predict(inputs, 1).step_s if single_step_s is None else single_step_s
    return [predict(inputs, n, single) for n in ranks]


def with_bytes_factor(inputs: Inputs, factor: float) -> Inputs:
    """The same job with a compressed all-reduce sending ``factor`` of the bytes
    (bf16: 0.5; PowerSGD rank r: r(rows + cols) / (rows x cols) per matrix)."""
    if not 0 < factor <= 1:
        raise ValueError(f"a bytes factor is in (0, 1], got {factor}")
    return replace(inputs, bytes_factor=inputs.bytes_factor * factor)


def recommend(
    inputs: Inputs, ranks: int, jobs: Mapping[str, Inputs]
) -> tuple[str, Prediction] | None:
    """The mode (name -> the job's inputs under it: ``modes.apply``) with the highest
    throughput on ``ranks`` when the exact all-reduce is communication-bound there;
    None when it is not, or when no mode beats it. Efficiency and speedup stay
    relative to one rank of the exact job."""
    exact = predict(inputs, ranks)
    if exact.bound != "communication":
        return None
    single = predict(inputs, 1).step_s
    best: tuple[str, Prediction] | None = None
    for name, job in jobs.items():
        guess = predict(job, ranks, single)
        if guess.samples_per_s > (best[1] if best else exact).samples_per_s:
            best = (name, guess)
    return best


@dataclass(frozen=True)
class Knee:
    """Where adding ranks stops paying: the first N whose efficiency is below the
    threshold (None when none up to the largest N), and why, in a sentence."""

    ranks: int | None
    threshold: float
    why: str


def knee(predictions: list[Prediction], inputs: Inputs, threshold: float = 0.8) -> Knee:
    """The first N below ``threshold`` efficiency, and what bounds the step there."""
    largest = predictions[-1]
    for p in predictions:
        if p.ranks > 1 and p.efficiency < threshold:
            return Knee(p.ranks, threshold, _why(p, inputs, threshold))
    return Knee(
        None,
        threshold,
        f"no knee up to {largest.ranks} ranks: efficiency stays at or above"
        f" {threshold:.0%} ({largest.efficiency:.0%} at {largest.ranks}); {largest.bound}-"
        f"bound there ({_ms(largest.comm_s)} of all-reduce vs"
        f" {_ms(inputs.backward_s * contention(inputs, largest.ranks))} of backward to hide it)",
    )


def _why(p: Prediction, inputs: Inputs, threshold: float) -> str:
    moved = 2 * (p.ranks - 1) / p.ranks * inputs.grad_bytes
    stretch = contention(inputs, p.ranks)
    if p.bound == "communication":
        return (
            f"knee at {p.ranks} ranks: efficiency {p.efficiency:.0%} < {threshold:.0%};"
            f" communication-bound: each rank sends {moved / 1e6:.3g} MB a step, which takes"
            f" {_ms(p.comm_s)} on the link, more than backward's"
            f" {_ms(inputs.backward_s * stretch)} that hides it (a faster link or fewer"
            " bytes helps, more compute does not)"
        )
    if stretch > 1:
        return (
            f"knee at {p.ranks} ranks: efficiency {p.efficiency:.0%} < {threshold:.0%};"
            f" compute-bound: {p.ranks} ranks of {inputs.threads} thread(s) share"
            f" {inputs.shared_cores:g} cores, so each computes {stretch:.3g}x slower (ranks"
            " on machines of their own, or fewer threads, help; a faster link does not)"
        )
    return (
        f"knee at {p.ranks} ranks: efficiency {p.efficiency:.0%} < {threshold:.0%};"
        f" compute-bound, but the last bucket's all-reduce and the per-hop latency"
        f" ({_ms(p.exposed_s)} a step) are not hidden by backward"
    )


def _ms(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def to_json(inputs: Inputs, predictions: list[Prediction], found: Knee) -> dict[str, object]:
    """The whole plan as plain data (``--json``)."""
    return {
        "inputs": {
            **asdict(inputs),
            "compute_s": inputs.compute_s,
            "grad_bytes": inputs.grad_bytes,
        },
        "predictions": [asdict(p) for p in predictions],
        "knee": asdict(found),
    }


def ranks_shown(largest: int) -> list[int]:
    """Every N up to 16; beyond, powers of two and the largest (a table that fits)."""
    if largest <= 16:
        return list(range(1, largest + 1))
    powers = [2**k for k in range(5, int(math.log2(largest)) + 1)]
    return sorted({*range(1, 17), *powers, largest})
