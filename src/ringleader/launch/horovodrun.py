"""``horovodrun``, Horovod's launcher command line, on ringleader.

Why: Horovod programs are started with ``horovodrun -np N [-H hosts] python
train.py`` (Run:ai's MPI walkthrough types it in the launcher pod), and users keep
their command lines.  Installed as ``horovodrun`` (and ``ringleader horovodrun``);
in an MPI workload's launcher pod it is first on ``PATH``.

Two modes, as Horovod's own:
- *Gloo* (the default outside a pod, ``--gloo``): ``ringleader launch --framework
  horovod`` on the hosts: each rank gets Horovod's Gloo names, node 0's agent
  serves the rendezvous, and the launch's fail-fast, merged output and no-orphans
  rules hold;
- *MPI* (the default in an MPI workload's launcher pod, ``--mpi``): ``mpirun``
  with Horovod's flags (``-bind-to none -map-by slot``, the environment exported
  as ``-x``), which in a launcher pod starts the ranks in the worker pods (its
  hostfile and remote shell are the pod's OpenMPI defaults).  Needs Horovod built
  with MPI (``make horovod`` builds both).

Hosts: ``-H a:2,b:2`` or ``--hostfile`` (``host slots=N`` lines); without either,
the workload's pods in a launcher pod, else this machine.  ``-np`` takes the
first N slots.  A host that is not one of the workload's (in a pod), or that
neither ssh's configuration nor DNS knows, is refused before anything starts.

Pure parsing and argv building, then one ``exec``: the launch (or mpirun) is the
process, so signals and the exit code are its own.  Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host, is_local_address, parse_host_list, parse_mpi_hostfile
from ringleader.launch.options import first_slots
from ringleader.launch.ssh import SSHOptions

#: Set in an MPI workload's launcher pod (``mpirun.launcher_defaults``): the gang's hostfile.
POD_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
DEFAULT_START_TIMEOUT_S = 30
# What mpirun does not carry to the ranks (Horovod's own list, and a pod's identity:
# each worker pod has its own).
NOT_EXPORTED = re.compile(
    r"BASH_FUNC_.*|OLDPWD|PWD|SHLVL|_|HOSTNAME|.*CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES"
    r"|OMPI_.*|PMIX_.*|OPAL_.*|RINGLEADER_.*"
)


class Usage(Exception):
    """A command line horovodrun refuses: the message names the flag or file:line."""


@dataclass(frozen=True)
class Request:
    """What the command line asked for."""

    num_proc: int
    hosts: list[Host]
    mode: str  # "gloo" or "mpi"
    start_timeout_s: int
    network_interface: str | None
    verbose: bool
    command: list[str]
    explicit_hosts: bool  # -H or --hostfile given (else this machine or the pod's)


SUMMARY = "Run a Horovod program as horovodrun does: -np N [-H a:2,b:2] COMMAND."


def parser(prog: str = "horovodrun") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"{SUMMARY}\n\nGloo mode runs the ranks with ringleader launch; MPI mode "
        "(the default\nin an MPI workload's launcher pod) with mpirun.",
        epilog=f"Examples:\n  {prog} -np 2 python train.py\n"
        f"  {prog} -np 4 -H a:2,b:2 python train.py\n"
        f"  {prog} -np 2 --hostfile hosts python train.py",
    )
    p.add_argument("-np", "--num-proc", dest="num_proc", type=int, metavar="N",
                   help="Total processes.")  # fmt: skip
    where = p.add_mutually_exclusive_group()
    where.add_argument("-H", "--hosts", metavar="HOSTS", help="Hosts as 'a:2,b:2'.")
    where.add_argument("-hostfile", "--hostfile", metavar="FILE",
                       help="Hostfile: 'host slots=N' lines.")  # fmt: skip
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--gloo", action="store_const", const="gloo", dest="mode",
                      help="Gloo controller, ranks started by ringleader launch.")  # fmt: skip
    mode.add_argument("--mpi", action="store_const", const="mpi", dest="mode",
                      help="MPI controller, ranks started by mpirun.")  # fmt: skip
    p.add_argument("--start-timeout", type=int, metavar="SECONDS",
                   help="Seconds the ranks wait for one another "
                   f"(default $HOROVOD_START_TIMEOUT or {DEFAULT_START_TIMEOUT_S}).")  # fmt: skip
    p.add_argument("--network-interface", "--network-interfaces", metavar="NIC",
                   dest="network_interface", help="Interface the ranks talk on.")  # fmt: skip
    p.add_argument("--verbose", action="store_true", help="Print the command it runs.")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND ...",
                   help="The program and its arguments.")  # fmt: skip
    return p


def parse(argv: Sequence[str], environ: Mapping[str, str], prog: str = "horovodrun") -> Request:
    """The request ``argv`` makes; Usage naming the flag or file:line when it is wrong."""
    p = parser(prog)
    args, unknown = p.parse_known_args(list(argv))
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if unknown:
        raise Usage(f"unknown option {unknown[0]!r} (see horovodrun --help)")
    if not command:
        raise Usage("no command: horovodrun -np N [options] COMMAND, e.g. python train.py")
    if args.num_proc is None:
        raise Usage("-np is required: how many processes to run")
    if args.num_proc < 1:
        raise Usage(f"-np {args.num_proc}: at least 1 process")
    in_pod = bool(environ.get(POD_HOSTFILE))
    mode = args.mode or ("mpi" if in_pod else "gloo")
    if mode == "gloo" and in_pod:
        raise Usage(
            "--gloo: in an MPI workload's launcher pod horovodrun starts the ranks in the "
            "worker pods through mpirun; use --mpi (the default here)"
        )
    hosts = _hosts(args, environ, in_pod, args.num_proc)
    timeout = args.start_timeout
    if timeout is None:
        raw = environ.get("HOROVOD_START_TIMEOUT", str(DEFAULT_START_TIMEOUT_S))
        timeout = int(raw) if raw.isdigit() else DEFAULT_START_TIMEOUT_S
    if timeout < 1:
        raise Usage(f"--start-timeout {timeout}: at least 1 second")
    return Request(
        num_proc=args.num_proc,
        hosts=hosts,
        mode=mode,
        start_timeout_s=timeout,
        network_interface=args.network_interface,
        verbose=args.verbose,
        command=command,
        explicit_hosts=bool(args.hosts or args.hostfile),
    )


def _hosts(
    args: argparse.Namespace, environ: Mapping[str, str], in_pod: bool, np: int
) -> list[Host]:
    """The hosts the first ``np`` slots of which run the ranks."""
    lines: dict[str, int] = {}
    try:
        if args.hosts:
            hosts, source = parse_host_list(args.hosts), "-H"
        elif args.hostfile:
            text = _read(args.hostfile, "--hostfile")
            hosts, source = parse_mpi_hostfile(text, args.hostfile), args.hostfile
            lines = _name_lines(text)
        elif in_pod:
            path = environ[POD_HOSTFILE]
            hosts, source = parse_mpi_hostfile(_read(path, POD_HOSTFILE), path), path
        else:
            return [Host("localhost", "127.0.0.1", np)]
    except InvalidSpec as exc:
        raise Usage(f"{exc.where}: {exc.problem}" if exc.where else exc.problem) from None
    if args.hosts or args.hostfile:
        known = _pod_hosts(environ) if in_pod else None
        for host in hosts:
            where = f"{source}:{lines[host.name]}" if host.name in lines else source
            if known is not None and host.name not in known:
                raise Usage(
                    f"{where}: host {host.name!r} is not one of this workload's "
                    f"({', '.join(sorted(known))})"
                )
            if known is None and not _resolves(host.name):
                raise Usage(f"{where}: unknown host {host.name!r}: neither ssh nor DNS knows it")
    slots = sum(h.slots for h in hosts)
    if np > slots:
        listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
        raise Usage(f"-np {np}: the hosts have {slots} slot(s) ({listed})")
    return first_slots(hosts, np)


def _read(path: str, flag: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise Usage(f"{flag} {path}: {exc.strerror or exc}") from None


def _name_lines(text: str) -> dict[str, int]:
    """Each host name of a hostfile -> its first line number."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words:
            found.setdefault(words[0].rsplit("@", 1)[-1], number)
    return found


def _pod_hosts(environ: Mapping[str, str]) -> set[str]:
    text = _read(environ[POD_HOSTFILE], POD_HOSTFILE)
    return {h.name for h in parse_mpi_hostfile(text, environ[POD_HOSTFILE])}


def _resolves(name: str) -> bool:
    """Whether ``name`` is a host: this machine, an ssh alias, or a DNS name."""
    if is_local_address(name):
        return True
    target = name
    config = SSHOptions.from_env(None).config_file  # the one launch will use
    try:
        shown = subprocess.run(["ssh", *(["-F", config] if config else []), "-G", name],
                               capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
        for line in shown.stdout.splitlines():
            key, _, value = line.partition(" ")
            if key == "hostname" and value:
                target = value.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        socket.getaddrinfo(target, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


def host_list(hosts: list[Host]) -> str:
    return ",".join(f"{h.ssh}:{h.slots}" for h in hosts)


def as_typed(command: list[str], path: str) -> list[str]:
    """``python`` is the one first on the caller's ``PATH`` (the environment that has
    Horovod), as horovodrun runs it: ``launch`` alone would give its own interpreter."""
    if command[0] in ("python", "python3"):
        found = shutil.which(command[0], path=path)
        if found:
            return [found, *command[1:]]
    return command


def launch_argv(request: Request, python: str, path: str = "") -> list[str]:
    """Gloo mode: ``ringleader launch --framework horovod`` on the request's hosts."""
    argv = [python, "-m", "ringleader", "launch", "--framework", "horovod"]
    argv += ["-H", host_list(request.hosts)]
    if request.network_interface:
        argv += ["--network-interface", request.network_interface]
    argv += ["-e", f"HOROVOD_GLOO_TIMEOUT_SECONDS={request.start_timeout_s}"]
    return [*argv, "--", *as_typed(request.command, path)]


def mpirun_argv(request: Request, environ: Mapping[str, str], as_root: bool) -> list[str]:
    """MPI mode: mpirun with Horovod's flags, the environment exported as ``-x``."""
    argv = ["mpirun", *(["--allow-run-as-root"] if as_root else []), "--tag-output"]
    argv += ["-np", str(request.num_proc)]
    if request.explicit_hosts or not environ.get(POD_HOSTFILE):
        argv += ["-H", ",".join(f"{'localhost' if h.is_local else h.ssh}:{h.slots}"
                                for h in request.hosts)]  # fmt: skip
    argv += ["-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]
    if request.network_interface:
        argv += ["-mca", "btl_tcp_if_include", request.network_interface]
        argv += ["-x", f"NCCL_SOCKET_IFNAME={request.network_interface}"]
    for key in sorted(environ):
        if not NOT_EXPORTED.fullmatch(key):
            argv += ["-x", key]
    return [*argv, *request.command]


def main(argv: Sequence[str] | None = None, prog: str = "horovodrun") -> int:
    """``horovodrun ARGS``: exec the launch or mpirun; 2 with a message on a bad line."""
    environ = dict(os.environ)
    try:
        request = parse(sys.argv[1:] if argv is None else argv, environ, prog)
    except Usage as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if request.mode == "gloo":
        run = launch_argv(request, sys.executable, environ.get("PATH", ""))
    else:
        run = mpirun_argv(request, environ, as_root=os.geteuid() == 0)
    if request.verbose:
        print(f"{prog}: {shlex.join(run)}", file=sys.stderr, flush=True)
    try:
        os.execvpe(run[0], run, environ)
    except OSError as exc:
        print(f"{prog}: error: cannot run {run[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    raise SystemExit(main())
