"""Horovod (``launch --framework horovod``, and ``horovodrun``'s Gloo mode): every rank
told its place the way ``horovodrun --gloo`` tells it, and a rendezvous to meet at.

Horovod's Gloo controller reads ``HOROVOD_RANK``/``SIZE``, ``LOCAL_RANK``/
``LOCAL_SIZE`` (ranks on this host), ``CROSS_RANK``/``CROSS_SIZE`` (hosts that
have a rank with this local rank), ``HOROVOD_HOSTNAME`` (its local scope's name)
and ``HOROVOD_GLOO_IFACE`` (where Gloo listens), then meets its peers in the
HTTP store at ``HOROVOD_GLOO_RENDEZVOUS_ADDR:_PORT``: here node 0's agent serves
that store on the attempt's master port (``launch/horovod_store.py``).

Launch only (no ``spec_name``): Run:ai has no Horovod framework; under the
control plane Horovod runs in an MPI workload (``horovodrun`` in its launcher
pod, as Run:ai's MPI walkthrough does).
"""

from __future__ import annotations

from ringleader.launch.frameworks import WORKERS_ONLY, Framework, RankPlace


def cross_place(place: RankPlace) -> tuple[int, int]:
    """(cross rank, cross size): this rank's host among the hosts that have a rank with
    its local rank, in host order (uneven slots make the later local ranks' sets smaller)."""
    slots = place.slots or (place.local_world_size,) * place.nnodes
    having = [node for node, count in enumerate(slots) if count > place.local_rank]
    return having.index(place.node_rank), len(having)


def horovod_env(place: RankPlace) -> dict[str, str]:
    cross_rank, cross_size = cross_place(place)
    env = {
        "HOROVOD_RANK": place.rank,
        "HOROVOD_SIZE": place.world_size,
        "HOROVOD_LOCAL_RANK": place.local_rank,
        "HOROVOD_LOCAL_SIZE": place.local_world_size,
        "HOROVOD_CROSS_RANK": cross_rank,
        "HOROVOD_CROSS_SIZE": cross_size,
        "HOROVOD_HOSTNAME": place.host or f"node-{place.node_rank}",
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": place.master_addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": place.master_port,
    }
    if place.interface:
        env["HOROVOD_GLOO_IFACE"] = place.interface
    return {key: str(value) for key, value in env.items()}


FRAMEWORK = Framework(
    name="horovod",
    summary="Horovod's Gloo names (HOROVOD_*), its rendezvous served on node 0",
    layout=WORKERS_ONLY,
    env=horovod_env,
    rendezvous="ringleader.launch.horovod_store:serve",
    consequences=("Horovod has been shut down",),
    example="horovodrun -np 2 python train.py",
)
