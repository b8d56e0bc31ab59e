"""Keep a rank alive after its command: the pod of an interactive workload.

``python -m ringleader.launch.keepalive [-- CMD ...]`` runs CMD (if any) with this
process's stdio and environment, says how it ended, and then waits until it
is stopped, so ``ringleader bash``/``exec`` find the pod with its working
directory and environment long after the command itself has ended (Run:ai's
``--interactive``).  It exits only by a signal: SIGTERM/SIGINT/SIGHUP are
passed on to a command still running and end the hold with 128+signal, the
code a stopped rank reports.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

MODULE = "ringleader.launch.keepalive"


def keepalive_argv(python: str, command: list[str]) -> list[str]:
    return [python, "-m", MODULE, "--", *command]


#: This module's contract in sh, for a pod in an image (which need not have Python or
#: ringleader): run "$@" (if any), say how it ended, hold the pod until a signal,
#: passing it on to a command still running and waiting for it (SIGINT as SIGTERM:
#: sh starts a background command with SIGINT ignored); exit 128+signal.
IMAGE_KEEPALIVE = r"""child=
stop() { [ -n "$child" ] && kill -s "$1" "$child" 2>/dev/null && wait "$child"; exit "$2"; }
trap 'stop TERM 143' TERM; trap 'stop TERM 130' INT; trap 'stop HUP 129' HUP
if [ $# -gt 0 ]; then
  "$@" <&0 & child=$!; wait "$child"; code=$?; child=
  echo "ringleader: the command exited with code $code; this interactive pod stays up for \
\`ringleader bash\`/\`exec\` until the workload is deleted or suspended" >&2
fi
while :; do sleep 3600 & wait $!; done
"""


def image_keepalive_argv(
    image_default: tuple[list[str], list[str]] | list[list[str]] | None, command: list[str]
) -> list[str]:
    """What an interactive pod's container runs: ``IMAGE_KEEPALIVE`` around its command;
    where the spec gives none (Kubernetes' rule: ``image_default`` is the image's
    entrypoint and default arguments, ``containers.ready_image`` read them) around the
    entrypoint with the arguments given, or with its default ones when none are."""
    if image_default:
        entry, default_args = image_default
        command = [*entry, *(command or default_args)]
    return ["/bin/sh", "-c", IMAGE_KEEPALIVE, "ringleader-keepalive", *command]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[1:] if args[:1] == ["--"] else args
    stopped = threading.Event()
    received: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)
        stopped.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    if command:
        try:
            child = subprocess.Popen(command)
        except OSError as exc:
            print(f"ringleader: cannot run {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        else:
            code = child.wait()
            if stopped.is_set():
                return 128 + received[0]
            print(
                f"ringleader: the command exited with code {code}; this interactive pod stays "
                "up for `ringleader bash`/`exec` until the workload is deleted or suspended",
                file=sys.stderr,
                flush=True,
            )
    stopped.wait()
    return 128 + received[0]


if __name__ == "__main__":
    sys.exit(main())
