"""``ringleader registry start|stop|status`` and ``ringleader image push|ls|sync``:
the cluster's registry (``server/registry.py``), the images in it, and an image
copied to hosts without one (``cluster/image_sync.py``).

Each acts on a server home (``--data-dir``, default ``$RINGLEADER_HOME`` or
``~/.ringleader``): the registry is that server's, and its agents pull from it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import typer
from rich.table import Table

from ringleader.cli.common import console, reports_errors
from ringleader.cluster import images
from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.containers import bad_reference, image_present
from ringleader.launch.listeners import owns_port, port_of
from ringleader.server import registry
from ringleader.server.config import home_dir

registry_app = typer.Typer(
    help="The cluster's image registry (Debian's docker-registry), under the server's home."
    "\n\nExamples:\n\n  ringleader registry start"
    "\n\n  ringleader image push localhost/team/train:1",
    no_args_is_help=True,
)
image_app = typer.Typer(
    help="Images: build them here, push them to the cluster's registry, list what it holds."
    "\n\nExamples:\n\n  ringleader image build -t localhost/team/train:1 ."
    "\n\n  ringleader image push localhost/team/train:1",
    no_args_is_help=True,
)
DATA_DIR = typer.Option(
    None,
    "--data-dir",
    metavar="DIR",
    help="The server's home (default $RINGLEADER_HOME or ~/.ringleader).",
)


def _home(data_dir: str | None) -> Path:
    return Path(data_dir).expanduser().absolute() if data_dir else home_dir()


@registry_app.command("start")
@reports_errors
def start(
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        metavar="ADDRESS",
        help="Where it listens: a cluster address for other nodes.",
    ),
    port: int = typer.Option(5000, "--port", min=1, max=65535, metavar="PORT", help="Its port."),
    data_dir: str = DATA_DIR,
) -> None:
    """Start the registry (it keeps running after this command; images persist).

    Every request needs the password made at start, kept 0600 in the home:
    the server's agents and `image push` use it; a tenant can neither push nor
    pull. Plain HTTP: keep it on 127.0.0.1 or a private cluster network.

    Examples:

      ringleader registry start

      ringleader registry start --host 10.0.0.1 --port 5000
    """
    home = _home(data_dir)
    before = registry.running(home)
    found = registry.start(home, host, port)
    said = "already runs" if before is not None else "started"
    images = registry.directory(home) / "data"
    typer.echo(f"registry {said} at {found.address} (pid {found.pid}; images in {images})")
    typer.echo("next: ringleader image push IMAGE")


@registry_app.command("stop")
@reports_errors
def stop(data_dir: str = DATA_DIR) -> None:
    """Stop the registry (its images stay for the next start).

    Example:

      ringleader registry stop
    """
    home = _home(data_dir)
    typer.echo("registry stopped" if registry.stop(home) else "no registry runs for this home")


@registry_app.command("status")
@reports_errors
def status(data_dir: str = DATA_DIR) -> None:
    """Say whether the registry runs, and where (exit 3 when it does not).

    Example:

      ringleader registry status
    """
    found = registry.running(_home(data_dir))
    if found is None:
        typer.echo("no registry runs for this home (ringleader registry start)")
        raise typer.Exit(3)
    typer.echo(f"registry runs at {found.address} (pid {found.pid})")


def _running(home: Path) -> registry.Registry:
    """The home's running registry, or an error saying how to start one."""
    found = registry.running(home)
    if found is None:
        raise RingleaderError(
            f"no registry runs for {home}: start one with `ringleader registry start`"
        )
    if not owns_port(found.pid, port_of(found.address)):  # never its password elsewhere
        raise RingleaderError(
            f"{found.address} is not served by the registry's process (pid {found.pid}) "
            "alone: not sending it the password; stop what else listens there"
        )
    return found


def pushed_name(image: str, address: str) -> str:
    """``image`` renamed into the registry at ``address``: its own registry part (if
    any) replaced, its path and tag kept (``latest`` when it has none)."""
    first, _, rest = image.partition("/")
    path = rest if rest and ("." in first or ":" in first or first == "localhost") else image
    name, at, digest = path.partition("@")
    if not at and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return f"{address}/{name}{at}{digest}"


@image_app.command("push")
@reports_errors
def push(
    image: str = typer.Argument(
        ..., metavar="IMAGE", help="A local image (podman images lists them)."
    ),
    data_dir: str = DATA_DIR,
) -> None:
    """Push a local image to the cluster's registry; print the name pods use.

    Example:

      ringleader image push localhost/team/train:1   # 127.0.0.1:5000/team/train:1
    """
    if problem := bad_reference(image):
        raise InvalidSpec(f"{image!r} is not an image reference: {problem}", "IMAGE")
    home = _home(data_dir)
    found = _running(home)
    podman = images.require_tool("podman", "podman")
    if not image_present(podman, image):
        raise RingleaderError(f"no image {image} here (`podman images` lists what there is)")
    target = pushed_name(image, found.address)
    done = subprocess.run(
        [podman, "push", "--tls-verify=false", "--authfile", found.authfile, "--", image, target],
        stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip  (podman's progress goes to the terminal as it comes)
    if done.returncode != 0:
        raise RingleaderError(
            f"podman push of {image} to {found.address} failed (exit {done.returncode}; above)"
        )
    typer.echo(f"pushed: {target}")
    typer.echo(f"run it: ringleader submit-dist pytorch NAME --workers 2 -i {target} -- ...")


@image_app.command("sync")
@reports_errors
def sync(
    image: str = typer.Argument(..., metavar="IMAGE", help="A local image (podman images)."),
    hosts: list[str] = typer.Argument(
        ..., metavar="HOST...", help="SSH targets (user@host, or names from ~/.ssh/config)."
    ),
    ssh_config: str = typer.Option(
        None, "--ssh-config", metavar="FILE", help="ssh config file (default: ssh's own)."
    ),
) -> None:
    """Copy a local image to each host that does not hold it (no registry needed).

    A host that has the same image (the same ID) is left alone; one that has none,
    or another image under this name, gets this one (podman save | ssh HOST podman
    load). Exit code 1 when any host failed.

    Example:

      ringleader image sync localhost/team/train:1 gpu1 gpu2 pi@mini-3
    """
    from ringleader.cluster.image_sync import Synced
    from ringleader.cluster.image_sync import sync as sync_hosts
    from ringleader.launch.ssh import SSHOptions

    if problem := bad_reference(image):
        raise InvalidSpec(f"{image!r} is not an image reference: {problem}", "IMAGE")
    if bad := [h for h in hosts if h.startswith("-") or not h.strip()]:
        raise InvalidSpec(f"{bad[0]!r} is not a host", "HOST")
    podman = images.require_tool("podman", "podman")
    if not image_present(podman, image):
        raise RingleaderError(f"no image {image} here (`podman images` lists what there is)")

    def said(outcome: Synced) -> None:
        if outcome.state == "same":
            typer.echo(f"{outcome.host}: has it already ({outcome.detail})")
        elif outcome.state == "copied":
            typer.echo(f"{outcome.host}: copied ({outcome.detail}) in {outcome.seconds:.1f} s")
        else:
            typer.echo(f"{outcome.host}: failed: {outcome.detail}", err=True)

    outcomes = sync_hosts(podman, image, hosts, SSHOptions.from_env(ssh_config), said)
    if any(o.state == "failed" for o in outcomes):
        raise typer.Exit(1)


@image_app.command("ls")
@reports_errors
def list_images(
    ssh_config: str = typer.Option(
        None, "--ssh-config", metavar="FILE", help="ssh config to reach the SSH nodes."
    ),
    data_dir: str = DATA_DIR,
) -> None:
    """List the registry's images, and which nodes hold each: this one and the SSH nodes.

    A node holds an image when it has the image the tag names in the registry
    now, by its ID: what a workload of it runs. Each node is asked over ssh.

    Example:

      ringleader image ls --ssh-config ~/.ssh/cluster_config
    """
    home = _home(data_dir)
    found = _running(home)
    held = registry.catalog(found)
    if not held:
        typer.echo(
            f"the registry at {found.address} holds no image yet (ringleader image push IMAGE)"
        )
        return
    podman = shutil.which("podman")
    nodes, unasked = _ssh_nodes_holdings(home, ssh_config)
    table = Table("IMAGE", "TAG", "ON THIS NODE", box=None)
    if nodes:
        table.add_column("SSH NODES")
    for name, tags in sorted(held.items()):
        for tag in tags or ["-"]:
            wanted = registry.image_id_of(found, name, tag) if tag != "-" else ""
            here = podman is not None and bool(wanted) and image_present(podman, wanted)
            row = [f"{found.address}/{name}", tag, "yes" if here else "no"]
            if nodes:
                row.append(_holders(nodes, wanted))
            table.add_row(*row)
    console.print(table)
    for line in unasked:
        typer.echo(line, err=True)


def _ssh_nodes_holdings(
    home: Path, ssh_config: str | None
) -> tuple[dict[str, set[str]], list[str]]:
    """Each SSH node of ``home``'s server (its ``nodes``) and the IDs of the images it
    holds; and a line for each node (or the server) that could not be asked."""
    from concurrent.futures import ThreadPoolExecutor

    from ringleader.client import Client
    from ringleader.cluster.image_sync import remote_ids
    from ringleader.launch.ssh import SSHOptions

    try:
        server = Client.connect(autostart=False, home=home)
        listed = [n for n in server.nodes() if n.kind == "ssh" and n.ssh]
    except RingleaderError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, [f"SSH nodes not asked: the server did not answer ({first})"]
    options = SSHOptions.from_env(ssh_config)
    with ThreadPoolExecutor(max(1, min(16, len(listed)))) as pool:
        answers = list(pool.map(lambda n: remote_ids(n.ssh, options), listed))
    holdings, unasked = {}, []
    for node, (ids, problem) in zip(listed, answers, strict=True):
        if problem:
            unasked.append(f"node {node.name}: not asked: {problem}")
        else:
            holdings[node.name] = ids
    return holdings, unasked


def _holders(nodes: dict[str, set[str]], wanted: str) -> str:
    """ "all 3", "none of 3" or "2 of 3 (not: n4)": the nodes that hold image ``wanted``."""
    if not wanted:
        return "?"
    missing = sorted(name for name, ids in nodes.items() if wanted not in ids)
    if not missing:
        return f"all {len(nodes)}"
    if len(missing) == len(nodes):
        return f"none of {len(nodes)}"
    return f"{len(nodes) - len(missing)} of {len(nodes)} (not: {', '.join(missing)})"


@image_app.command("base")
@reports_errors
def base(
    tag: str = typer.Option(images.BASE_IMAGE, "-t", "--tag", metavar="IMAGE", help="Its name."),
    suite: str = typer.Option("bookworm", "--suite", metavar="SUITE", help="Debian release."),
    mirror: str = typer.Option(images.MIRROR, "--mirror", metavar="URL", help="Debian mirror."),
    include: list[str] = typer.Option(
        None, "--include", metavar="PKG", help="Another Debian package (repeatable)."
    ),
) -> None:
    """Make a Debian base image from Debian's packages (no image registry needed).

    A minimal Debian with python3, python3-venv, ca-certificates and procps, made
    by mmdebstrap and imported into podman: the FROM of images built here
    (examples/images/pytorch-cpu/Containerfile).

    Its name: localhost/ringleader/debian-python:bookworm unless --tag says another.

    Example (as root):

      ringleader image base
    """
    if problem := bad_reference(tag):
        raise InvalidSpec(f"{tag!r} is not an image reference: {problem}", "--tag")
    images.make_base(tag, suite=suite, mirror=mirror, include=tuple(include or ()), echo=typer.echo)
    typer.echo(f"made {tag}; next: ringleader image build -f Containerfile -t NAME .")


@image_app.command("build")
@reports_errors
def build(
    context: str = typer.Argument(
        ".", metavar="CONTEXT", help="The build context (default .).", show_default=False
    ),
    tag: str = typer.Option(..., "-t", "--tag", metavar="IMAGE", help="The image's name."),
    file: str = typer.Option(
        None, "-f", "--file", metavar="FILE", help="Containerfile (default CONTEXT/Containerfile)."
    ),
    build_arg: list[str] = typer.Option(
        None, "--build-arg", metavar="KEY=VALUE", help="A Containerfile ARG (repeatable)."
    ),
    push_it: bool = typer.Option(False, "--push", help="Then push it to the cluster's registry."),
    data_dir: str = DATA_DIR,
) -> None:
    """Build an image with podman, pip working as on this host.

    The build reaches the network as this host does and sees this host's pip
    configuration, CA bundle and local wheel directories (read-only, not in the
    image), with a pip cache kept between builds in the server's home.

    Examples:

      ringleader image build -t localhost/team/train:1 .      # as root

      ringleader image build -f cpu.Containerfile -t localhost/t/cpu:2 --push .
    """
    if problem := bad_reference(tag):
        raise InvalidSpec(f"{tag!r} is not an image reference: {problem}", "--tag")
    for pair in build_arg or []:
        if "=" not in pair or pair.startswith("="):
            raise InvalidSpec(f"expected KEY=VALUE, got {pair!r}", "--build-arg")
    containerfile = file or str(Path(context) / "Containerfile")
    home = _home(data_dir)
    cache = home / "cache" / "pip"
    took = images.build(containerfile, tag, context, cache, list(build_arg or []), typer.echo)
    typer.echo(f"built {tag} in {took:.0f} s")
    if push_it:
        push(tag, data_dir)
    else:
        typer.echo(f"next: ringleader image push {tag}")
