"""A Python every OS account can run, for a root server's workloads.

Why: a root server runs each user's workloads as that user's OS account
(``--run-as user``, its default).  The server's own interpreter is often one
those accounts cannot run: a virtual environment under ``/root``, or pyenv's
Python there (``/root`` is 0700).  Debian's ``/usr/bin/python3`` they can run,
but it has neither ringleader (which every pod's keepalive and supervisor
import) nor the packages a training program imports (torch, numpy,
scikit-learn), so every workload would fail and restart.

So the server decides at start, before it accepts a workload:

- its own interpreter, when an unprivileged account can run it and import
  ringleader (a system-wide install, a venv under ``/opt``);
- else the shared one ``ringleader workload-python`` made (``SHARED_DIR``): a
  venv of a Python every account can run, with ringleader and this server's
  versions of the workload packages, readable by all;
- else it refuses to start, naming the choices that work and, for each Python
  found on the machine, what it lacks (``refusal``).

Every check runs the interpreter as an unprivileged account (``nobody``), as a
pod would: readable paths are what that account can read, not what root can.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ringleader.errors import InvalidSpec

#: Where ``ringleader workload-python`` makes the shared interpreter and where a root
#: server looks for it (``RINGLEADER_WORKLOAD_PYTHON_DIR`` moves both, e.g. for tests).
DEFAULT_SHARED_DIR = "/var/lib/ringleader/python"
#: What workloads import beside ringleader: the examples' and the walkthrough images'
#: programs (the digits CNN). Import name -> distribution name.
WORKLOAD_MODULES = {"torch": "torch", "numpy": "numpy", "sklearn": "scikit-learn"}
#: Pythons a user may already have that every account can run (the refusal probes them).
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
PROBE_ACCOUNT = "nobody"
STALE = "its ringleader is another version than this server's (the launch code differs)"


def launch_digest(package_dir: str) -> str:
    """A digest of ringleader's launch package in ``package_dir`` (supervisor, agent,
    keepalive: what runs under the workload's Python). Sent into the probe as source:
    standard library only, imports inside."""
    import hashlib
    import os

    top = os.path.join(package_dir, "launch")
    digest = hashlib.sha256()
    for name in sorted(os.listdir(top)):
        if name.endswith(".py"):
            with open(os.path.join(top, name), "rb") as f:
                digest.update(name.encode() + b"/" + f.read())
    return digest.hexdigest()[:16]


PROBE = (
    inspect.getsource(launch_digest)
    + """
import importlib.util, json, os, sys
out = {"version": "%d.%d" % sys.version_info[:2], "ringleader": "", "missing": [], "launch": ""}
try:
    import ringleader.launch.keepalive
    out["launch"] = launch_digest(os.path.dirname(ringleader.__file__))
except Exception as exc:
    out["ringleader"] = "%s: %s" % (type(exc).__name__, exc)
for name in sys.argv[1:]:
    try:
        found = importlib.util.find_spec(name) is not None
    except Exception:
        found = False
    if not found:
        out["missing"].append(name)
print(json.dumps(out))
"""
)


def own_launch_digest() -> str:
    """This server's ``launch_digest``: a workload Python must run the same launch code."""
    import ringleader

    return launch_digest(os.path.dirname(ringleader.__file__))


def shared_dir() -> Path:
    """Where the shared workload interpreter lives (``SHARED_DIR`` unless moved)."""
    return Path(os.environ.get("RINGLEADER_WORKLOAD_PYTHON_DIR") or DEFAULT_SHARED_DIR)


def shared_python() -> Path:
    return shared_dir() / "bin" / "python3"


@dataclass
class Probe:
    """What an unprivileged account finds when it runs ``python``."""

    python: str
    cannot_run: str = ""  # why it does not start for the account ("" = it starts)
    ringleader: str = ""  # why ``import ringleader`` fails ("" = it imports)
    missing: list[str] = field(default_factory=list)  # WORKLOAD_MODULES it lacks
    version: str = ""  # its X.Y

    @property
    def runs_pods(self) -> bool:
        """It starts and imports ringleader: pods (keepalive, supervisor) can run."""
        return not self.cannot_run and not self.ringleader

    def lacks(self) -> list[str]:
        """What to install for workloads: ringleader first, then the packages."""
        names = [WORKLOAD_MODULES.get(m, m) for m in self.missing]
        return (["ringleader"] if self.ringleader else []) + names


def probe(python: str, *, account: str = PROBE_ACCOUNT, pythonpath: str | None = None) -> Probe:
    """Run ``python`` as ``account`` (from ``/``, a minimal environment, as a pod's
    interpreter starts) and report what it can import.  ``pythonpath``: the server's
    PYTHONPATH, which pods get too (a source checkout readable by all)."""
    found = Probe(python)
    try:
        entry = pwd.getpwnam(account)
        done = subprocess.run(
            [python, "-c", PROBE, *WORKLOAD_MODULES],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (KeyError, OSError, subprocess.TimeoutExpired) as exc:
        found.cannot_run = getattr(exc, "strerror", None) or str(exc)
        return found
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = done.stderr.strip().splitlines()[-1:]
        found.cannot_run = last[0] if last else f"exit {done.returncode}"
        return found
    found.ringleader = report.get("ringleader", "")
    found.missing = list(report.get("missing", []))
    found.version = report.get("version", "")
    if not found.ringleader and report.get("launch") != own_launch_digest():
        found.ringleader = STALE
    return found


def for_accounts(server_python: str, *, account: str = PROBE_ACCOUNT) -> str:
    """The interpreter a root server's workloads run with when ``--workload-python`` is
    not given: its own if ``account`` can run it, else the shared one if made; else
    InvalidSpec naming what works."""
    path = os.environ.get("PYTHONPATH")
    own = probe(server_python, account=account, pythonpath=path)
    if own.runs_pods:
        return server_python
    shared = shared_python()
    made = probe(str(shared), account=account) if shared.exists() else None
    if made is not None and made.runs_pods:
        return str(shared)
    raise InvalidSpec(refusal(own, account, made), "--workload-python")


def refusal(own: Probe, account: str, shared: Probe | None = None) -> str:
    """Why the server cannot start as it is, and the commands that make it start (each
    a command line, then what it does, wrapped for an 80-column terminal).  ``shared``:
    what the shared Python, made earlier, is found to be (it is remade)."""
    why = own.cannot_run or own.ringleader
    again = ""
    if shared is not None:
        again = f" (the one there now cannot run pods: {shared.cannot_run or shared.ringleader})"
    choices = [
        (
            "sudo ringleader workload-python" + (" --force" if shared is not None else ""),
            f"makes {shared_dir()}, a Python every account can run, with ringleader, torch, "
            f"numpy and scikit-learn as this server has them{again}; then start the server "
            "again",
        ),
        (
            "sudo ringleader server --run-as server",
            "every workload runs as the server's own account (root): only where every "
            "user may be root",
        ),
    ]
    for python in SYSTEM_PYTHONS:
        if not os.path.exists(python) or os.path.realpath(python) == os.path.realpath(own.python):
            continue
        other = probe(python, account=account)
        if not other.cannot_run:
            lacks = other.lacks()
            state = f"lacks {', '.join(lacks)}: install them for it" if lacks else "has all"
            choices.append((f"sudo ringleader server --workload-python {python}", state))
    lines = [
        "workloads run as each user's OS account (--run-as user, a root server's "
        f"default), and an unprivileged account ({account}) cannot use this server's "
        f"Python, {own.python} ({why}). Any one of these works:"
    ]
    for command, what in choices:
        lines += [
            "",
            f"  {command}",
            *textwrap.wrap(
                what,
                78,
                initial_indent=" " * 6,
                subsequent_indent=" " * 6,
                break_long_words=False,
                break_on_hyphens=False,
            ),
        ]
    return "\n".join(lines)


def warning(found: Probe) -> str:
    """A caution for a ``--workload-python`` that runs pods but lacks workload packages."""
    if not found.missing:
        return ""
    names = ", ".join(WORKLOAD_MODULES.get(m, m) for m in found.missing)
    return (
        f"warning: --workload-python {found.python} lacks {names}: a workload that "
        "imports them fails (`sudo ringleader workload-python` makes a Python with them)"
    )


# ----- making the shared interpreter ----------------------------------------------------
def ringleader_requirement() -> str:
    """How pip installs this ringleader: its source directory where it was installed
    from one (a checkout, editable or not), else its released version."""
    dist = importlib.metadata.distribution("ringleader")
    try:
        origin = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        origin = {}
    url = origin.get("url", "")
    if url.startswith("file://") and "dir_info" in origin:
        return url.removeprefix("file://")
    return f"ringleader=={dist.version}"


def server_pins() -> list[str]:
    """``name==version`` of every package in the server's environment that came from
    an index: pip's constraints, so the shared Python gets the server's versions."""
    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or dist.read_text("direct_url.json"):  # a checkout or a local file
            continue
        pins.setdefault(name.lower(), f"{name}=={dist.version}")
    return sorted(pins.values())


def packages_to_install(extra: list[str]) -> list[str]:
    """Ringleader, the workload packages the server has, and the user's ``--package``s."""
    have = []
    for dist in WORKLOAD_MODULES.values():
        try:
            have.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return [ringleader_requirement(), *have, *extra]


def make(
    target: Path, *, base: str, extra: list[str], replace: bool, echo: Callable[[str], None]
) -> Probe:
    """Make ``target``: a venv of ``base`` with :func:`packages_to_install`, readable
    by all, checked as an unprivileged account.  On any failure nothing is left."""
    if target.exists() and not replace:
        raise InvalidSpec(f"{target} exists (--force makes it anew)", "--dir")
    base_probe = probe(base)
    if base_probe.cannot_run:
        raise InvalidSpec(
            f"{base}: an unprivileged account cannot run it ({base_probe.cannot_run}); "
            "name a Python every account can run, e.g. /usr/bin/python3",
            "--base",
        )
    closed = _closed_ancestor(target)
    if closed is not None:
        raise InvalidSpec(
            f"{closed} is not enterable by other accounts: pick a directory they can reach",
            "--dir",
        )
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        _build(target, base, extra, echo)
        made = probe(str(target / "bin" / "python3"))
        if not made.runs_pods or made.missing:
            raise InvalidSpec(
                f"{target} was made but an unprivileged account cannot use it "
                f"({made.cannot_run or made.ringleader or 'lacks ' + ', '.join(made.lacks())})",
                "--dir",
            )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return made


def _build(target: Path, base: str, extra: list[str], echo: Callable[[str], None]) -> None:
    echo(f"making {target} from {base} (venv)")
    _step([base, "-m", "venv", str(target)], "venv", "--base")
    packages = packages_to_install(extra)
    echo("installing " + " ".join(packages))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="rl-pins-") as pins:
        pins.write("\n".join(server_pins()) + "\n")
        pins.flush()
        python = str(target / "bin" / "python3")
        pip = [python, "-m", "pip", "install", "--no-input", "-c", pins.name, *packages]
        _step(pip, "pip", "--package")
    _readable_by_all(target)


def _step(argv: list[str], what: str, option: str) -> None:
    """Run one step with its output on the terminal (pip's progress); InvalidSpec if
    it fails (the caller removes what it made)."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
    if done.returncode != 0:
        raise InvalidSpec(f"{what} exited {done.returncode} (its output is above)", option)


def _readable_by_all(top: Path) -> None:
    """a+rX on everything under ``top`` (whatever the umask was when pip wrote it)."""
    for root, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                continue
            extra = stat.S_IRGRP | stat.S_IROTH
            if stat.S_ISDIR(mode) or mode & stat.S_IXUSR:
                extra |= stat.S_IXGRP | stat.S_IXOTH
            os.chmod(path, stat.S_IMODE(mode) | extra)
    os.chmod(top, 0o755)


def _closed_ancestor(target: Path) -> Path | None:
    """The first existing ancestor of ``target`` that others cannot enter, if any."""
    for parent in reversed(target.absolute().parents):
        if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
            return parent
    return None
