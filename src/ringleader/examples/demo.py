"""``make demo``: the digits example as a 2-worker PyTorch workload, through the control plane.

Run it as ``python -m ringleader.examples.demo``.  It does what a user would type:

1. starts the embedded server (``ringleader server``) in the background, with a
   home of its own (``./.ringleader-demo``; ``--home`` or ``RINGLEADER_DEMO_HOME``)
   so it never reads or writes the user's ``~/.ringleader``, on its own port
   (8471, or any free one if that is taken) so it never answers for the user's
   own server on 8470;
2. ``ringleader submit-dist pytorch digits-XXXXXX --name-prefix --workers 2 --
   python -m ringleader.examples.digits`` (a fresh name each run, so a second run
   never clashes with the first);
3. ``ringleader logs NAME -f``: every pod's output, merged, until the workload ends;
4. prints the final test accuracy, the API's URL, its OpenAPI docs and how to
   get a token.

The server is left running (a second run reuses it), because the point of
printing the API's URL is to let the user look around: ``ringleader list``, the
docs page, ``curl``.  How to stop it is printed too (``make demo-stop``, i.e.
``python -m ringleader.examples.demo --stop``); ``--stop-after`` stops it at the
end instead.  Exit status: 0 when the workload completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ringleader.launch.procs import process_argv

DEFAULT_HOME = ".ringleader-demo"
DEFAULT_PORT = 8471  # not the server's 8470: that one belongs to the user's own server
PID_FILE = "server.pid"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
FINAL_PHASES = ("Completed", "Failed", "Stopped")
ACCURACY = re.compile(r"final test accuracy: (\d+\.\d+)")
DEMO_IMAGE = "localhost/ringleader/pytorch-cpu:2.13"  # examples/images/pytorch-cpu
SUBMITTED = re.compile(r"The workload '([^']+)' has been submitted")


# ----- processes ------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    """A live process (a zombie is not)."""
    return process_argv(pid) is not None


def _is_our_server(pid: int, home: Path) -> bool:
    """``pid`` is a live ``ringleader server`` whose RINGLEADER_HOME is ``home``."""
    if not _alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return not Path("/proc").is_dir()  # no /proc to check: trust the pid file
    return b"server" in cmdline and f"RINGLEADER_HOME={home}".encode() in environ


def server_pid(home: Path) -> int | None:
    """The pid of this home's running demo server, from its pid file."""
    try:
        pid = int((home / PID_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _is_our_server(pid, home) else None


def stop_workloads(url: str, home: Path) -> list[str]:
    """Suspend this server's unfinished workloads (after a Ctrl-C) and wait for them to stop."""
    from ringleader.client import Client
    from ringleader.errors import RingleaderError

    creds = _credentials(home) or {}
    c = Client(url, creds["clientId"], creds["clientSecret"])
    done = (*FINAL_PHASES, "Deleted")
    active = [w for w in c.list_workloads(limit=500).workloads if w.actual_phase not in done]
    for w in active:
        with contextlib.suppress(RingleaderError):
            c.action(w.workload_id, "suspend")
    deadline = time.monotonic() + STOP_TIMEOUT_S + 15
    for w in active:
        while time.monotonic() < deadline:
            try:
                if c.workload(w.workload_id).actual_phase in done:
                    break
            except RingleaderError:
                break
            time.sleep(0.1)
    return [w.name for w in active]


def stop_server(home: Path, *, workloads: bool = False) -> int | None:
    """SIGTERM this home's demo server, SIGKILL after a grace; its pid, or None if none ran.

    With ``workloads``, first suspend the workloads it still runs (their
    processes are detached from the server and would outlive it).
    """
    from ringleader.connection import read_config

    pid = server_pid(home)
    url = read_config(home).get("url")
    if pid is not None and workloads and url and _answers_to_us(url, home):
        stopped = stop_workloads(url, home)
        if stopped:
            print(f"suspended the unfinished workloads: {', '.join(stopped)}")
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (home / PID_FILE).unlink(missing_ok=True)
    return pid


# ----- the server -----------------------------------------------------------------------
def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _credentials(home: Path) -> dict[str, str] | None:
    try:
        return json.loads((home / "credentials.json").read_text())
    except (OSError, ValueError):
        return None


def _answers_to_us(url: str, home: Path) -> bool:
    """The server at ``url`` is up and takes this home's key (so it is ours, not another)."""
    from ringleader.client import Client
    from ringleader.connection import healthy
    from ringleader.errors import RingleaderError

    creds = _credentials(home)
    if not creds or not healthy(url):
        return False
    try:
        Client(url, creds["clientId"], creds["clientSecret"]).token()
    except (RingleaderError, OSError, KeyError):
        return False
    return True


def ensure_server(
    home: Path, port: int, env: dict[str, str], ringleader: list[str]
) -> tuple[str, int, bool]:
    """This home's server, started if needed: (url, pid, started)."""
    from ringleader.connection import read_config, write_config

    url = read_config(home).get("url")
    pid = server_pid(home)
    if pid is not None and url and _answers_to_us(url, home):
        return url, pid, False
    if pid is not None:  # running but not answering: start afresh
        stop_server(home)
    if port == 0 or not _port_free(port):
        if port:
            print(f"(port {port} is taken; using a free one)")
        port = _free_port()
    url = f"http://127.0.0.1:{port}"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    # A personal server for this demo: its workloads run as you (a shared server run
    # as root gives each user's workloads an account of their own: docs/security.md).
    command = [*ringleader, "server", "--port", str(port), "--run-as", "server"]
    print(f"$ {_shown(command, ringleader)} &   # state in {home}, log in {home / 'server.log'}")
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # it outlives this demo, and Ctrl-C here
        )
    (home / PID_FILE).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers_to_us(url, home):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            (home / PID_FILE).unlink(missing_ok=True)
            raise SystemExit(
                f"the server did not start (exit {proc.returncode}):\n"
                + _tail(home / "server.log", 20)
            )
        time.sleep(0.1)
    write_config({"url": url}, home)  # so `RINGLEADER_HOME=<home> ringleader ...` finds it
    return url, proc.pid, True


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ----- the CLI, as a user types it -------------------------------------------------------
def ringleader_command() -> list[str]:
    """The ``ringleader`` script next to this interpreter (the venv's), else ``-m``."""
    script = Path(sys.executable).with_name("ringleader")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "ringleader"]


def _display_name(ringleader: list[str]) -> str:
    """How to write the ringleader command for the user to type it."""
    if len(ringleader) > 1:
        return shlex.join(ringleader)
    on_path = shutil.which("ringleader")
    if on_path and Path(on_path).resolve() == Path(ringleader[0]).resolve():
        return "ringleader"
    relative = os.path.relpath(ringleader[0])
    return relative if not relative.startswith("..") else ringleader[0]


def _shown(command: list[str], ringleader: list[str]) -> str:
    return " ".join([_display_name(ringleader), shlex.join(command[len(ringleader) :])])


def clean_env(home: Path) -> dict[str, str]:
    """The user's environment minus every RINGLEADER_* setting, plus the demo's home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGLEADER_")}
    env["RINGLEADER_HOME"] = str(home)
    return env


def _phase(url: str, home: Path, name: str) -> tuple[str, str]:
    import httpx

    from ringleader.client import Client
    from ringleader.errors import RingleaderError

    creds = _credentials(home) or {}
    try:
        w = Client(url, creds["clientId"], creds["clientSecret"]).find(name)
    except (RingleaderError, httpx.HTTPError, KeyError) as exc:
        return "Unknown", f"cannot ask the server: {exc}"
    return w.actual_phase, w.phase_message or ""


def run_demo(args: argparse.Namespace) -> int:
    home = Path(args.home).resolve()
    env = clean_env(home)
    ringleader = ringleader_command()
    started = time.monotonic()

    if args.image:
        from ringleader.examples.demo_image import ensure_image

        problem = ensure_image(args.image, ringleader, env, lambda c: _shown(c, ringleader))
        if problem:
            print(f"demo failed: {problem}", file=sys.stderr)
            return 1
    url, pid, fresh = ensure_server(home, args.port, env, ringleader)
    print(f"server {'started' if fresh else 'already running'}: {url} (pid {pid})")

    command = [
        *ringleader,
        "submit-dist",
        "pytorch",
        "digits",
        "--name-prefix",
        "--workers",
        str(args.workers),
        *(["--backoff-limit", str(args.backoff_limit)] if args.backoff_limit is not None else []),
        *(["-i", args.image] if args.image else []),
        "--",
        "python",
        "-m",
        "ringleader.examples.digits",
        *args.digits_args,
    ]
    print(f"$ {_shown(command, ringleader)}", flush=True)
    submitted = subprocess.run(command, env=env, capture_output=True, text=True)
    sys.stdout.write(submitted.stdout)
    sys.stderr.write(submitted.stderr)
    match = SUBMITTED.search(submitted.stdout)
    if submitted.returncode != 0 or not match:
        print("demo failed: the workload was not submitted", file=sys.stderr)
        return 1
    name = match.group(1)
    rl = _display_name(ringleader)
    print(f"(here `ringleader` is {rl} with RINGLEADER_HOME={home}: see the end for how to "
          "type it yourself)")  # fmt: skip

    command = [*ringleader, "logs", name, "-f"]
    print(f"$ {_shown(command, ringleader)}", flush=True)
    print("(the digits example prints from rank 0, the master, only: the workers train silently)")
    accuracy = None
    follow = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    watchdog = threading.Timer(args.timeout, follow.kill)
    watchdog.start()
    try:
        for line in follow.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            found = ACCURACY.search(line)
            if found and "master-0" in line:
                accuracy = found.group(1)
    except BaseException:  # Ctrl-C: the follower goes too
        follow.kill()
        raise
    finally:
        watchdog.cancel()
        follow.wait()

    deadline = time.monotonic() + 30  # the logs end with the workload; the phase is final
    phase, message = _phase(url, home, name)
    while phase not in FINAL_PHASES and time.monotonic() < deadline:
        time.sleep(0.2)
        phase, message = _phase(url, home, name)
    elapsed = time.monotonic() - started

    print()
    ok = phase == "Completed"
    if not ok:
        print(f"demo failed: workload {name} is {phase}" + (f": {message}" if message else ""))
        print(f"  see: {_display_name(ringleader)} describe {name}")
    elif accuracy is None:
        print(f"demo failed: workload {name} completed but printed no final accuracy")
        ok = False
    else:
        print(f"final test accuracy: {accuracy}   (workload {name}, {phase}, {elapsed:.0f}s)")

    if args.stop_after:
        stop_server(home)
        print(f"server stopped (pid {pid}); its state stays in {home}")
        return 0 if ok else 1
    quoted = shlex.quote(str(home))
    # The venv's ringleader on your PATH (activate), unless it already is.
    activate = f". {rl.removesuffix('ringleader')}activate; " if rl.endswith("/ringleader") else ""
    if home == Path(DEFAULT_HOME).resolve() and Path("Makefile").is_file():
        stop = f"make demo-stop   (or: kill {pid})"
    else:
        stop = f"kill {pid}   (or: python -m ringleader.examples.demo --stop --home {quoted})"
    print(
        f"\nThe control plane keeps running (pid {pid}), its state in {home}:\n"
        f"  Web UI:    {url}/   (log in with the admin's key in {home}/credentials.json)\n"
        f"  API:       {url}   (REST under {url}/api/v1)\n"
        f"  API docs:  {url}/docs   (OpenAPI: {url}/openapi.json; both need the token)\n"
        f"  Token:     RINGLEADER_HOME={quoted} {rl} token\n"
        f"  Try:       {activate}export RINGLEADER_HOME={quoted}\n"
        f"             {rl} list; {rl} describe {name}\n"
        f'             curl -H "Authorization: Bearer $({rl} token)" {url}/api/v1/workloads\n'
        f"  Stop it:   {stop}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ringleader.examples.demo",
        description="Start the embedded server, submit the digits example as a 2-worker "
        "PyTorch workload, follow its logs, print its accuracy and the API's URL.",
        epilog="Arguments after -- go to the digits example, e.g. -- --epochs 3.",
    )
    parser.add_argument(
        "--home",
        default=os.environ.get("RINGLEADER_DEMO_HOME") or DEFAULT_HOME,
        help="The demo server's RINGLEADER_HOME (default $RINGLEADER_DEMO_HOME or "
        f"./{DEFAULT_HOME}); never the user's ~/.ringleader.",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("RINGLEADER_DEMO_PORT") or DEFAULT_PORT),
        help=f"Port for a newly started server (default {DEFAULT_PORT}; 0 or taken: any free).",
    )
    parser.add_argument("--workers", type=int, default=2, help="Workers besides the master.")
    parser.add_argument(
        "--backoff-limit", type=int, help="Gang restarts after a failure (default: the server's)."
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="Give up following the logs after this."
    )
    parser.add_argument("--stop-after", action="store_true", help="Stop the server at the end.")
    parser.add_argument(
        "--image",
        nargs="?",
        const=DEMO_IMAGE,
        metavar="IMAGE",
        help=f"Run the workload in an image (root, podman; default {DEMO_IMAGE}, made from "
        "examples/images/pytorch-cpu when missing).",
    )
    parser.add_argument(
        "--stop",
        action="store_true",
        help="Only stop this home's demo server (and its unfinished workloads), then exit.",
    )
    parser.add_argument("digits_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stop:
        home = Path(args.home).resolve()
        pid = stop_server(home, workloads=True)
        print(f"stopped the demo server (pid {pid})" if pid else f"no demo server runs for {home}")
        return 0
    try:
        return run_demo(args)
    except KeyboardInterrupt:
        stop = "make demo-stop" if Path(args.home).resolve() == Path(DEFAULT_HOME).resolve() else ""
        stop = stop or f"python -m ringleader.examples.demo --stop --home {shlex.quote(args.home)}"
        print(f"\ninterrupted: the server and the workload keep running; stop both: {stop}")
        return 130


if __name__ == "__main__":
    sys.exit(main())
