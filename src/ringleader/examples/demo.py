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

The server's start, reuse and stop (its pid file, port, key) are
``examples/demo_server.py``; this module is the user's side: the commands typed,
the job followed, the summary printed, and the flags.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ringleader.examples.demo_server import FINAL_PHASES, credentials, ensure_server, stop_server

DEFAULT_HOME = ".ringleader-demo"
DEFAULT_PORT = 8471  # not the server's 8470: that one belongs to the user's own server
ACCURACY = re.compile(r"final test accuracy: (\d+\.\d+)")
DEMO_IMAGE = "localhost/ringleader/pytorch-cpu:2.13"  # examples/images/pytorch-cpu
SUBMITTED = re.compile(r"The workload '([^']+)' has been submitted")


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

    creds = credentials(home) or {}
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
    url, pid, fresh = ensure_server(
        home, args.port, env, ringleader, lambda c: _shown(c, ringleader)
    )
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
