"""The best offer a reason names for a fraction of one device, read node by node,
equals the first largest figure of one flat list over every device (the plain
reading, kept here as the specification) on random nodes: devices of one size or
of several, used shares with float noise, portions and memory fractions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ringleader.sched import Gpu, Node, PodRequest
from ringleader.sched.nodes import EPS, NodeState
from ringleader.sched.placement import device_share
from ringleader.sched.shortage import _gpu_offer, _most_free
from ringleader.sched.text import number, size

GiB = 1 << 30
SIZES = (40 * GiB, 80 * GiB, 141 * GiB)
# Shares a device is used by: tenths, thirds (float noise) and the full device.
USED = st.sampled_from((0.0, 0.1, 0.2, 0.25, 0.3, 1 / 3, 0.5, 2 / 3, 0.7, 0.9, 1.0, 1.0 - 1e-12))


def plain_offer(nodes: list[NodeState], pod: PodRequest) -> str:
    """Every device's room and free figure, in node and device order."""
    room = [
        used + device_share(pod, g.memory_bytes if pod.gpu_portion is None else 0) <= 1 + EPS
        for n in nodes
        for g, used in zip(n.gpus, n.used, strict=True)
    ]
    if any(room):
        return ""
    if pod.gpu_memory_bytes is not None:
        devices = [
            (n, g, (1.0 - u) * g.memory_bytes)
            for n in nodes
            for g, u in zip(n.gpus, n.used, strict=True)
        ]
    else:
        devices = [(n, g, 1.0 - u) for n in nodes for g, u in zip(n.gpus, n.used, strict=True)]
    figures = [f for _, _, f in devices]
    n, g, best = devices[figures.index(max(figures))]
    if pod.gpu_memory_bytes is not None:
        return f"the most free GPU memory on any device is {size(best)} ({n.name} GPU {g.index})"
    return f"the largest free share of any GPU is {number(best)} ({n.name} GPU {g.index})"


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[NodeState], PodRequest]:
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        count = draw(st.integers(0 if i else 1, 4))
        one_size = draw(st.booleans())
        sizes = (
            [draw(st.sampled_from(SIZES))] * count
            if one_size
            else [draw(st.sampled_from(SIZES)) for _ in range(count)]
        )
        state = NodeState(Node(f"node-{i}", 64.0, 512 * GiB, tuple(map(Gpu, range(count), sizes))))
        state.used[:] = [draw(USED) for _ in range(count)]
        nodes.append(state)
    if draw(st.booleans()):
        pod = PodRequest(
            "p", 1.0, GiB, 1, gpu_portion=draw(st.sampled_from((0.1, 0.25, 0.5, 0.75)))
        )
    else:
        pod = PodRequest(
            "p", 1.0, GiB, 1, gpu_memory_bytes=draw(st.sampled_from((10, 30, 60))) * GiB
        )
    return nodes, pod


@settings(max_examples=400, deadline=None)
@given(pools())
def test_one_device_offer_equals_the_plain_reading(
    case: tuple[list[NodeState], PodRequest],
) -> None:
    nodes, pod = case
    assert _gpu_offer(nodes, pod) == plain_offer(nodes, pod)


def test_no_room_anywhere_names_the_first_most_free_device() -> None:
    nodes = [NodeState(Node(f"node-{i}", 64.0, 512 * GiB, (Gpu(0, 80 * GiB), Gpu(1, 80 * GiB))))
             for i in range(3)]  # fmt: skip
    for n, used in zip(nodes, ([1.0, 0.9], [0.8, 0.8], [0.9, 0.8]), strict=True):
        n.used[:] = used
    pod = PodRequest("p", 1.0, GiB, 1, gpu_portion=0.25)
    assert _gpu_offer(nodes, pod) == "the largest free share of any GPU is 0.2 (node-1 GPU 0)"
    nodes[2].used[1] = 0.75
    assert _gpu_offer(nodes, pod) == ""
    assert _most_free("0", "node-0", 0.0) == "none is free on any ready node"
