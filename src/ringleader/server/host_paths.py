"""Host directories mounted into image pods: Run:ai's ``storage.hostPath``, the CLI's
``-v/--volume SRC:DST[:ro]`` and ``--host-path path=SRC,mount=DST[,readwrite]``.

Why a policy: on a shared server a host path is a door out of the image, so the
server's admin says which host directories pods may mount (``ringleader server
--host-path-allow DIR``, repeatable).  Without the flag, a server whose workloads
run as itself allows everything (its workloads can read what it can anyway) and
a shared one (per-user accounts) allows nothing.

Two checks, one rule: at submission the path as written must be under an allowed
directory (a 422 naming ``spec.storage.hostPath[i].path``); on the host, the
agent opens it *as the pod's account* (``launch/container_mounts``) and checks
where the descriptor really is, so a symlink inside an allowed directory that
leads out of it is refused there too (``launch/container_mounts.open_volume``).

A process pod (no image) sees the host's files as they are: a host path there
would be a no-op or a lie, so it is refused naming the field.
"""

from __future__ import annotations

from ringleader.errors import InvalidSpec
from ringleader.launch.container_mounts import under
from ringleader.runai_fields import HostPathVolume
from ringleader.spec import WorkloadSpec

FLAG = "ringleader server --host-path-allow DIR"


def volumes_of(spec: WorkloadSpec) -> list[tuple[str, HostPathVolume]]:
    """The host paths the pods mount, each with where it is in the spec: the workers'
    and, where the master has a spec of its own, the master's too (every pod of the
    gang mounts them all: its image pods share one container plan); ``exclude``d out."""
    blocks = [("spec", spec.spec)]
    if spec.master() is not spec.spec:
        blocks.append(("masterSpec", spec.master()))
    out: list[tuple[str, HostPathVolume]] = []
    for block, pod in blocks:
        found = pod.storage.host_path if pod.storage is not None and pod.storage.host_path else []
        where = f"{block}.storage.hostPath"
        out += [(f"{where}[{i}].path", v) for i, v in enumerate(found) if not v.exclude]
    kept, unique = set(), []
    for where, volume in out:  # the master's copy of a worker's volume is one mount
        if (volume.path, volume.mount_path) not in kept:
            kept.add((volume.path, volume.mount_path))
            unique.append((where, volume))
    return unique


def check(spec: WorkloadSpec, allowed: tuple[str, ...], in_image: bool) -> None:
    """Refuse the first host path this server does not mount (InvalidSpec naming it)."""
    mounts: dict[str, str] = {}
    for where, volume in volumes_of(spec):
        if volume.mount_path in mounts:
            raise InvalidSpec(
                f"two host paths are mounted at {volume.mount_path} ({mounts[volume.mount_path]} "
                f"and {volume.path}): one directory a mount path",
                where.removesuffix(".path") + ".mountPath",
            )
        mounts[volume.mount_path] = volume.path
        if not in_image:
            raise InvalidSpec(
                f"host path {volume.path} is mounted into pods that run in an image; these "
                "pods run as processes on the host and see its files as they are: give an "
                "image, or leave the host path out",
                where,
            )
        if not under(volume.path, allowed):
            said = ", ".join(allowed) if allowed else "none"
            raise InvalidSpec(
                f"host path {volume.path} is not under a directory this server lets pods "
                f"mount (allowed: {said}; its admin names them with `{FLAG}`)",
                where,
            )


def planned(spec: WorkloadSpec) -> list[list[object]]:
    """``LaunchSpec.container["volumes"]``: ``[path, mountPath, read_only]`` each,
    read-only unless the spec says ``readOnly: false`` (runapy's default: true)."""
    return [[v.path, v.mount_path, v.read_only is not False] for _, v in volumes_of(spec)]
