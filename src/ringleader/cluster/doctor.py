"""``ringleader doctor``: every preflight check on every host, each failure with its fix.

Checks, per host (the first host is the master, as rank 0's host):
- login: batch SSH login (keys, host key) -- everything else needs it; an entry
  naming this machine (``localhost``) runs here, as ``launch`` runs it, no ssh;
- workdir: the working directory exists there;
- python: the same interpreter path, and the same version as here;
- versions: the same torch and ringleader versions as here;
- code: the working directory's fingerprint equals this machine's
  (``probe.fingerprint``): "the code must be at the same path on all nodes",
  checked instead of hoped;
- disk: free space in the working directory (``min_free_bytes``);
- gpus: what nvidia-smi lists (informational unless it fails);
- clock: skew from this machine, within the SSH round trip;
- interface: the interface and address the host uses toward the master (or
  ``--network-interface``'s); with more than one host, loopback is unusable,
  and so is a master named by a loopback address (``localhost``); the host
  must reach itself over TCP (at 127.0.0.1 and that address), which fails
  when its loopback interface is down: the kernel routes a host's own
  addresses through it, so rank 0 could not reach its own store;
- mesh: every host can open a TCP connection to every other host's address on
  a fresh port (what the rendezvous and the collectives need);
- paths (``--require-path``): each path exists there (a toolkit every node needs).

Invariants: one SSH connection per host and phase, hosts in parallel; the
probe (``probe.py``) is passed as ``python -c`` with ``shlex.quote``; nothing
is installed or changed on the hosts.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringleader.cluster import probe
from ringleader.cluster.probe import FINGERPRINT_MAX_BYTES, FINGERPRINT_MAX_FILES, TOO_BIG
from ringleader.defaults import home_inside
from ringleader.launch.ssh import SSHOptions, classify_failure, host_argv, is_here

CHECKS = (
    "login",
    "workdir",
    "python",
    "versions",
    "code",
    "disk",
    "gpus",
    "clock",
    "interface",
    "mesh",
)
MAX_SKEW_S = 2.0
PROBE = Path(probe.__file__).read_text()


@dataclass
class Check:
    ok: bool | None  # None: not run (an earlier check failed)
    detail: str = ""
    fix: str = ""


@dataclass
class HostReport:
    host: str
    target: str  # what ssh is given
    checks: dict[str, Check] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks.values())


@dataclass(frozen=True)
class Plan:
    hosts: list[tuple[str, str]]  # (name shown, ssh target)
    workdir: str
    python: str
    interface: str | None = None
    ssh: SSHOptions = field(default_factory=SSHOptions)
    min_free_bytes: int = 1 << 30
    master: str | None = None  # the master's address (default: the first host's name)
    image: str = ""  # an image every host must hold as this machine does (image drift)
    image_id: str = ""  # this machine's ID of it
    require_paths: tuple[str, ...] = ()  # paths every host must have (seed 000's oneAPI)


def _remote(plan: Plan, target: str, *args: str) -> list[str]:
    command = " ".join(shlex.quote(a) for a in (plan.python, "-c", PROBE, *args))
    return host_argv(target, command, plan.ssh)


def run(plan: Plan) -> list[HostReport]:
    local = _local_facts(plan)
    master = plan.master or plan.hosts[0][1].rpartition("@")[2]
    with ThreadPoolExecutor(max(1, len(plan.hosts))) as pool:
        reports = list(pool.map(lambda h: _facts(plan, h, master, local), plan.hosts))
    _mesh(plan, [r for r in reports if r.checks["interface"].ok])
    for report in reports:
        report.checks.setdefault("mesh", Check(None, "not run"))
        if plan.image:
            report.checks.setdefault("image", Check(None, "not run"))
        if plan.require_paths:
            report.checks.setdefault("paths", Check(None, "not run"))
    return reports


def _image(plan: Plan, name: str, target: str) -> Check:
    """The host holds ``plan.image`` with this machine's ID (no image drift)."""
    from ringleader.cluster.image_sync import remote_id

    there, problem = remote_id(target, plan.image, plan.ssh)
    if problem:
        return Check(False, problem, f"install podman (or docker) on {name}")
    wanted = plan.image_id
    if there == wanted:
        return Check(True, f"{plan.image} {wanted[:12]}")
    fix = f"`ringleader image sync {plan.image} {target}` (or pull it there)"
    if not there:
        return Check(False, f"no {plan.image} there", fix)
    return Check(False, f"{plan.image} is {there[:12]} there (here: {wanted[:12]})", fix)


def _skips(plan: Plan) -> list[str]:
    """The probe's ``--skip``: this machine's home when it lies in the working directory."""
    home = home_inside(Path(plan.workdir))
    return [f"--skip={home}"] if home is not None else []


def _local_facts(plan: Plan) -> dict[str, Any]:
    done = subprocess.run(
        [
            plan.python if os.path.exists(plan.python) else sys.executable,
            "-c",
            PROBE,
            "facts",
            plan.workdir,
            "127.0.0.1",
            *_skips(plan),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout)


def _facts(plan: Plan, host: tuple[str, str], master: str, local: dict[str, Any]) -> HostReport:
    name, target = host
    report = HostReport(name, target)
    args = ["facts", plan.workdir, master, *([plan.interface] if plan.interface else [])]
    args += _skips(plan)
    started = time.time()
    done = subprocess.run(
        _remote(plan, target, *args),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    ended = time.time()
    checks = report.checks
    if done.returncode == 255:  # ssh's own failure: nothing ran there
        stage, detail, fix = classify_failure(target, done.stderr)
        checks["login"] = Check(False, f"{stage}: {detail}", fix)
        return _skip_rest(report)
    login = "this machine (no ssh)" if is_here(target) else "batch login works"
    checks["login"] = Check(True, login)
    if done.returncode == 127 or not done.stdout.strip():
        checks["python"] = Check(
            False,
            f"{plan.python} cannot run there ({_last(done.stderr)})",
            f"install the same Python at {plan.python} on {name} (or give --python)",
        )
        return _skip_rest(report)
    facts = report.facts = json.loads(done.stdout.strip().splitlines()[-1])
    checks["workdir"] = (
        Check(True, plan.workdir)
        if facts["workdir"]
        else Check(
            False,
            f"{plan.workdir} is missing",
            f"`ringleader sync` (or rsync the directory to {name}:{plan.workdir})",
        )
    )
    checks["python"] = _same(
        f"{facts['python']} {facts['python_version']}",
        f"{plan.python} {local['python_version']}",
        f"use the same interpreter and version on {name}",
    )
    theirs = f"torch {facts['torch']}, ringleader {facts['ringleader']}"
    ours = f"torch {local['torch']}, ringleader {local['ringleader']}"
    checks["versions"] = _same(
        theirs, ours, f"`ringleader install` (pip install the same versions on {name})"
    )
    checks["code"] = code_check(plan.workdir, name, facts, local)
    free = facts["free_bytes"]
    checks["disk"] = (
        Check(True, f"{free / 1e9:.1f} GB free")
        if free >= plan.min_free_bytes
        else Check(False, f"{free / 1e9:.2f} GB free", f"free disk space on {name}")
    )
    checks["gpus"] = Check(True, "; ".join(facts["gpus"]) or "none")
    skew = facts["time"] - (started + ended) / 2
    bound = MAX_SKEW_S + (ended - started) / 2
    checks["clock"] = (
        Check(True, f"{skew:+.2f} s")
        if abs(skew) <= bound
        else Check(False, f"{skew:+.1f} s off", f"enable time sync (chrony/ntp) on {name}")
    )
    checks["interface"] = _interface(name, facts, plan, master)
    if plan.image:
        checks["image"] = _image(plan, name, target)
    if plan.require_paths:
        checks["paths"] = _paths(plan, name, target)
    return report


def _paths(plan: Plan, name: str, target: str) -> Check:
    """Every ``plan.require_paths`` exists on the host (one shell there for all)."""
    quoted = " ".join(shlex.quote(p) for p in plan.require_paths)
    command = f'for p in {quoted}; do [ -e "$p" ] || echo "$p"; done'
    done = subprocess.run(host_argv(target, command, plan.ssh), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    missing = done.stdout.split("\n")[:-1] if done.returncode == 0 else list(plan.require_paths)
    if not missing:
        return Check(True, ", ".join(plan.require_paths))
    return Check(False, f"missing: {', '.join(missing)}", f"install or mount them on {name}")


def _interface(name: str, facts: dict[str, Any], plan: Plan, master: str) -> Check:
    """The interface toward the master, and the causes that hide behind "no route"."""
    interface, address = facts["interface"], facts["address"]
    several = len(plan.hosts) > 1
    unreached = {a: e for a, e in (facts.get("self_reach") or {}).items() if e}
    if unreached:
        where = ", ".join(f"{a}: {e}" for a, e in unreached.items())
        return Check(
            False,
            f"the loopback interface is down: it cannot reach itself over TCP ({where})",
            f"`ip link set lo up` on {name} as root (and at boot): a host reaches its own "
            "addresses through lo, as rank 0 does its store",
        )
    if plan.interface and address is None:
        return Check(
            False,
            f"no IPv4 address on {plan.interface}",
            f"give --network-interface one that {name} has (see `ip -4 addr`)",
        )
    resolved = facts.get("master_address")
    if several and resolved and resolved.startswith("127."):
        return Check(
            False,
            f"the master {master} is {resolved} there, a loopback address: each host "
            "would reach itself",
            "name the first host by an address every host reaches (e.g. its eth0 "
            "address, `ip -4 addr` on it), not localhost",
        )
    if address is None:
        error = facts.get("route_error") or "no route"
        if facts.get("master_error"):
            return Check(
                False,
                f"the master {master} does not resolve there ({facts['master_error']})",
                f"name the first host by an address {name} reaches, or add it to {name}'s "
                "/etc/hosts (an alias of ~/.ssh/config is known to ssh only)",
            )
        return Check(
            False,
            f"no route to the master {master} ({error})",
            f"check {name}'s network and routes (`ip route get {master}` on it)",
        )
    if several and (address.startswith("127.") or interface == "lo"):
        return Check(
            False,
            f"{interface or '?'} {address}: loopback, unreachable from others",
            "pick the interface the hosts share with --network-interface",
        )
    return Check(True, f"{interface or '?'} {address}")


def _mesh(plan: Plan, reports: list[HostReport]) -> None:
    """Listen on a fresh port on every host, then connect from every host to every other."""
    listeners: list[tuple[HostReport, subprocess.Popen[str], str]] = []
    try:
        for report in reports:
            argv = _remote(plan, report.target, "listen", report.facts["address"])
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            port = proc.stdout.readline().strip()
            listeners.append((report, proc, f"{report.facts['address']}:{port}"))
        ready = {r.host: endpoint for r, _, endpoint in listeners if endpoint.split(":")[1]}

        def connect(report: HostReport) -> None:
            others = [ep for host, ep in ready.items() if host != report.host]
            if not others:
                report.checks["mesh"] = Check(True, "no other host")
                return
            done = subprocess.run(
                _remote(plan, report.target, "connect", *others),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
            )
            results = json.loads(done.stdout.strip() or "{}")
            failed = {ep: err for ep, err in results.items() if err}
            by_endpoint = {ep: host for host, ep in ready.items()}
            if failed or not results:
                text = ", ".join(f"{by_endpoint[ep]} ({err})" for ep, err in failed.items())
                report.checks["mesh"] = Check(
                    False,
                    f"cannot reach {text or 'the others'}",
                    "open TCP ports between the hosts (firewall) or pick the shared "
                    "interface with --network-interface",
                )
            else:
                report.checks["mesh"] = Check(True, f"reaches all {len(results)} others")

        with ThreadPoolExecutor(max(1, len(reports))) as pool:
            list(pool.map(connect, reports))
        for report in reports:
            if report.host not in ready:
                report.checks["mesh"] = Check(
                    False, "could not listen on a fresh port", "check the host's network"
                )
    finally:
        for _, proc, _ in listeners:
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def code_check(workdir: str, name: str, facts: dict[str, Any], local: dict[str, Any]) -> Check:
    """The code check: the working directory's fingerprint there against here's."""
    if not facts["workdir"]:
        return Check(None, "no working directory")
    if TOO_BIG in (facts["code"], local["code"]):
        return Check(
            None,
            f"not compared: {workdir} holds over {FINGERPRINT_MAX_FILES:,} files or "
            f"{FINGERPRINT_MAX_BYTES >> 30} GB; run doctor from your project's directory "
            "(or leave data out with a .ringleaderignore)",
        )
    return _same(
        f"{facts['code']} ({facts['files']} files)",
        f"{local['code']} ({local['files']} files)",
        f"`ringleader sync` to copy this directory to {name}",
    )


def _same(theirs: str, ours: str, fix: str) -> Check:
    return Check(True, theirs) if theirs == ours else Check(False, f"{theirs} (here: {ours})", fix)


def _skip_rest(report: HostReport) -> HostReport:
    for check in CHECKS:
        report.checks.setdefault(check, Check(None, "not run"))
    return report


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"
