"""``ringleader server``'s options, one ``Annotated`` type each: what the command
takes and how its help presents it, kept apart from what it does (``cli/server.py``)
so that the command reads as its steps."""

from __future__ import annotations

from typing import Annotated

import typer

NODES_PANEL = "Nodes"  # a panel of its own: its on/off flag's second column narrows the help


HostOption = Annotated[
    str,
    typer.Option(
        "--host",
        metavar="ADDRESS",
        help="Address to listen on (default: this machine only).",
    ),
]


PortOption = Annotated[
    int,
    typer.Option(
        "--port",
        metavar="PORT",
        help="Port to listen on.",
    ),
]


DataDirOption = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="State directory (default $RINGLEADER_HOME or ~/.ringleader).",
    ),
]


SimulateNodesOption = Annotated[
    str | None,
    typer.Option(
        "--simulate-nodes",
        metavar="NODES",
        rich_help_panel=NODES_PANEL,
        help="Place pods on declared simulated nodes instead of this machine:"
        " NxMgpu[:MEM]\\[@POOL], comma-separated (4x8gpu: sim-0..sim-3 with 8 GPUs of 80G)."
        " Their pods run here.",
    ),
]


NodesFileOption = Annotated[
    str | None,
    typer.Option(
        "--nodes-file",
        metavar="FILE",
        rich_help_panel=NODES_PANEL,
        help="A YAML inventory of simulated nodes: a list of {name, gpus, gpuMemory, cpu, memory,"
        " pool, labels}.",
    ),
]


PlacementOption = Annotated[
    str,
    typer.Option(
        "--placement",
        metavar="POLICY",
        rich_help_panel=NODES_PANEL,
        help="How the scheduler picks nodes: a placement policy (binpack, spread or one"
        " registered in ringleader.sched.policies).",
    ),
]


LocalNodeOption = Annotated[
    bool,
    typer.Option(
        "--local-node/--no-local-node",
        rich_help_panel=NODES_PANEL,
        help="Whether this machine is a node (off: workloads run only on nodes added with"
        " `ringleader nodes add`).",
    ),
]


SshConfigOption = Annotated[
    str | None,
    typer.Option(
        "--ssh-config",
        metavar="FILE",
        rich_help_panel=NODES_PANEL,
        help="ssh config file for SSH nodes (probes, heartbeats, launches; also"
        " $RINGLEADER_SSH_CONFIG).",
    ),
]


BackendOption = Annotated[
    list[str],
    typer.Option(
        "--backend",
        metavar="BACKEND",
        rich_help_panel=NODES_PANEL,
        help="NAME[:ARG]\\[@POOL]: the backend that runs a node pool's work (repeatable): local,"
        " ssh, slurm:PARTITION (a Slurm partition's nodes and sbatch jobs), or a backend class's"
        " dotted path; without @POOL, the default for pools not named. Default: local (and ssh"
        " for gangs on SSH nodes).",
    ),
]


MaxBodyBytesOption = Annotated[
    int,
    typer.Option(
        "--max-body-bytes",
        metavar="BYTES",
        min=1024,
        help="Refuse request bodies larger than this with 413 (default 4 MiB).",
    ),
]


MaxFollowsPerUserOption = Annotated[
    int,
    typer.Option(
        "--max-follows-per-user",
        metavar="N",
        min=1,
        help="Open `logs --follow` streams a user may have at once; the next is refused"
        " with 429 (default 8).",
    ),
]


HeaderTimeoutOption = Annotated[
    float,
    typer.Option(
        "--header-timeout",
        metavar="SECONDS",
        min=0.1,
        help="Close a connection that has not sent a whole request header within this"
        " (default 10): half-open connections cannot pile up.",
    ),
]


BodyTimeoutOption = Annotated[
    float,
    typer.Option(
        "--body-timeout",
        metavar="SECONDS",
        min=0.1,
        help="Answer 408 to a request whose body has not arrived whole within this of its"
        " header (default 60).",
    ),
]


MaxLogBytesOption = Annotated[
    int,
    typer.Option(
        "--max-log-bytes",
        metavar="BYTES",
        min=4096,
        help="Each rank's log (stdout, stderr) in the data directory: past this it is"
        " rotated to FILE.1, the older output dropped, and `describe` says so"
        " (default 64 MiB).",
    ),
]


RunAsOption = Annotated[
    str | None,
    typer.Option(
        "--run-as",
        metavar="MODE",
        help="Who workloads run as: user (an unprivileged OS account of the submitter: its"
        " osUser, else --run-as-template, created on first use; needs a root server; the"
        " default as root), account:NAME (every workload as the existing OS account NAME;"
        " a non-root server goes through sudo and refuses to start without the sudoers rule"
        " it prints) or server (the server's own user, which can read the server's files:"
        " the default when not root).",
    ),
]


RunAsTemplateOption = Annotated[
    str,
    typer.Option(
        "--run-as-template",
        metavar="TEMPLATE",
        help="The OS account of a user without an osUser, from the ringleader user name"
        " (made a POSIX name; created with useradd on first use).",
    ),
]


WorkloadPythonOption = Annotated[
    str | None,
    typer.Option(
        "--workload-python",
        metavar="PATH",
        help="The interpreter for `python` in workload commands and interactive pods"
        " (default: the server's); with --run-as user, unprivileged users must be able to run"
        " it (e.g. /usr/bin/python3); with account:NAME and no root, it must import"
        " ringleader without PYTHONPATH (sudo passes none): a venv of /usr/bin/python3.",
    ),
]
HostPathAllowOption = Annotated[
    list[str] | None,
    typer.Option(
        "--host-path-allow",
        metavar="DIR",
        help="A host directory image pods may mount (-v, storage.hostPath), with what is"
        " under it; repeat for more. Default: everything when workloads run as the server,"
        " nothing on a shared server (per-user accounts).",
        show_default=False,
    ),
]
ContainerRuntimeOption = Annotated[
    str | None,
    typer.Option(
        "--container-runtime",
        metavar="NAME",
        help="podman or docker: what runs image pods where a node has both (default:"
        " podman, else docker; docs/images.md names the environment variable).",
        show_default=False,
    ),
]
ImagePullTimeoutOption = Annotated[
    float,
    typer.Option(
        "--image-pull-timeout",
        metavar="SECONDS",
        min=1,
        help="How long each host may pull a workload's image (default 45); a pull that"
        " takes longer fails the gang, with no restart.",
    ),
]
