"""``ringleader sync`` and ``ringleader install``: same code, same packages, every host.

- *sync*: rsync a directory to the same absolute path on every host (the
  launcher runs ranks in the same working directory everywhere; an entry naming
  this machine is the source itself), honouring
  ``.gitignore`` files and a ``.ringleaderignore`` (rsync filter rules:
  one pattern per line, ``#`` comments), never ``.git`` itself;
- *install*: ``PYTHON -m pip install ARGS`` with the same interpreter path on
  every host (this machine's entry without ssh).

Invariants: hosts in parallel, each with its own outcome (one failure never
hides the others); every remote command is built with ``shlex.quote``; SSH
runs in batch mode with host keys checked (``launch.ssh``).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ringleader.defaults import home_inside
from ringleader.errors import InvalidSpec
from ringleader.launch.ssh import SSHOptions, classify_failure, host_argv, is_here, ssh_argv

IGNORE_FILE = ".ringleaderignore"
_PROGRESS = re.compile(r"(\d+)%")
_TRANSFERRED = re.compile(r"Number of regular files transferred: ([\d,]+)")


@dataclass
class Outcome:
    host: str
    ok: bool
    detail: str
    fix: str = ""


def _rsh(opts: SSHOptions) -> str:
    """rsync's ``-e``: ssh with our options (batch mode, host keys checked)."""
    argv = ssh_argv("HOST", "CMD", opts)[:-3]  # ssh and its options, without -T HOST CMD
    return " ".join(shlex.quote(a) for a in argv)


def rsync_argv(source: Path, target: str, opts: SSHOptions) -> list[str]:
    if target.startswith("-"):
        raise InvalidSpec(f"refusing host name that looks like an option: {target!r}", "HOST")
    path = str(source.resolve())
    argv = ["rsync", "-a", "--delete", "--info=progress2", "--no-inc-recursive", "--stats"]
    argv += ["-e", _rsh(opts), "--exclude=/.git", "--filter=:- .gitignore"]
    if (source / IGNORE_FILE).is_file():
        argv += [f"--exclude-from={source / IGNORE_FILE}"]
    home = home_inside(source)  # never code (doctor leaves it out too)
    if home is not None:
        argv += [f"--exclude=/{home}/"]
    # The same path there; --mkpath (rsync >= 3.2.3) creates missing parents. rsync
    # >= 3.2.4 protects the remote path from the remote shell itself: no quoting here.
    return [*argv, "--mkpath", f"{path}/", f"{target}:{path}/"]


def sync(
    source: Path,
    hosts: list[str],
    opts: SSHOptions,
    progress: Callable[[str, int], None] = lambda host, percent: None,
) -> list[Outcome]:
    if not source.is_dir():
        raise InvalidSpec(f"{source} is not a directory", "DIR")

    def one(host: str) -> Outcome:
        if is_here(host):  # the same path on this machine: the source itself
            progress(host, 100)
            return Outcome(host, True, f"this machine: {source.resolve()} is the source")
        proc = subprocess.Popen(
            rsync_argv(source, host, opts),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        copied = 0
        for chunk in iter(lambda: proc.stdout.readline(), ""):  # type: ignore[union-attr]
            for match in _PROGRESS.finditer(chunk.replace("\r", "\n")):
                progress(host, int(match[1]))
            copied += _copied(chunk)
        error = proc.stderr.read()
        if proc.wait() != 0:
            stage, detail, fix = classify_failure(host, error)
            return Outcome(host, False, f"{stage}: {detail}", fix or _last(error))
        progress(host, 100)
        if not copied:
            return Outcome(host, True, f"{source.resolve()} already up to date")
        return Outcome(host, True, f"{source.resolve()}: {_files(copied)} copied")

    with ThreadPoolExecutor(max(1, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def install(python: str, pip_args: list[str], hosts: list[str], opts: SSHOptions) -> list[Outcome]:
    if not pip_args:
        raise InvalidSpec("nothing to install: give -r FILE or pip arguments after --", "ARGS")
    command = " ".join(shlex.quote(a) for a in (python, "-m", "pip", "install", *pip_args))

    def one(host: str) -> Outcome:
        done = subprocess.run(
            host_argv(host, command, opts),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if done.returncode == 255:
            stage, detail, fix = classify_failure(host, done.stderr)
            return Outcome(host, False, f"{stage}: {detail}", fix)
        if done.returncode != 0:
            return Outcome(
                host,
                False,
                _last(done.stderr) or _last(done.stdout),
                f"run `{command}` on {host} to see pip's whole output",
            )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("Successfully installed")]
        return Outcome(host, True, lines[-1] if lines else "requirements already satisfied")

    with ThreadPoolExecutor(max(1, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def _copied(text: str) -> int:
    """Files rsync's ``--stats`` says it sent (0 when ``text`` is not that line)."""
    found = _TRANSFERRED.search(text)
    return int(found[1].replace(",", "")) if found else 0


def _files(count: int) -> str:
    return f"{count} file{'s' if count != 1 else ''}"


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
