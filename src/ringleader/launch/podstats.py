"""CPU and memory per pod, sampled by the agent that owns the pod's ranks on its host.

Why the agent: it started the ranks (each the leader of its own session), it
lives exactly as long as they do, and it runs on their host, so it measures
them locally on any backend.  It samples only when the ranks' environment
names a metrics directory (``RINGLEADER_METRICS_DIR``, set by the server's
planning): plain ``ringleader launch`` writes nothing.

Every ``INTERVAL_S`` (the first sample ``FIRST_SAMPLE_S`` after the first
rank starts) one JSON line per pod with a live process is appended to
``METRICS_DIR/pod-<pod>.resources.jsonl``::

    {"time": 1764000000.1, "cpu": 1.52, "memoryBytes": 123456789}

``cpu``: the cores used on average since the pod's previous sample (null in
its first); ``memoryBytes``: what it holds now.  Where the pod has a cgroup
(the local backend: the ranks' ``RINGLEADER_CGROUP`` names it) the kernel's
numbers are read: CPU from ``cpuacct.usage`` (v1) or ``cpu.stat``'s
``usage_usec`` (v2), memory as the working set (``memory.usage_in_bytes``
or ``memory.current`` less the inactive page cache, as Kubernetes counts
it).  Otherwise each rank's session is summed from ``/proc/PID/stat``
(utime+stime with the reaped children's, and RSS), one ``/proc`` scan per
sample for every pod of the host.

Bounds and failures: a file takes at most ``MAX_FILE_BYTES`` (then one
``{"capped": true}`` line and no more); a process that vanished mid-read is
normal and a read error skips one value, never the run; a file that cannot
be opened or written stops that pod's sampling with one line on stderr.
Files are created without following a link (the directory may be the
account's own, and the agent may be root: ``_PodFile._open``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Mapping, Sequence

INTERVAL_S = 2.0
FIRST_SAMPLE_S = 0.5
MAX_FILE_BYTES = 8 * 1024 * 1024  # about 40 days of 2-second samples
METRICS_DIR = "RINGLEADER_METRICS_DIR"  # runtime.metrics.METRICS_DIR (not imported: start-up)
POD_VAR = "RINGLEADER_POD"
#: cgroups.JOIN_VAR: the ``cgroup.procs`` files (space-separated) of the pod's cgroup
CGROUP_VAR = "RINGLEADER_CGROUP"
RANK_ENV = "RINGLEADER_RANK_ENV"  # launch.plan.RANK_ENV: MPI ranks' own environments
SUFFIX = ".resources.jsonl"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def file_name(pod: str) -> str:
    return f"pod-{pod}{SUFFIX}"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode(errors="replace")
    except OSError:
        return None


def int_of(text: str | None) -> int | None:
    """A cgroup file's one number (``memory.current``), None when absent or not one."""
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def keyed_number(text: str | None, key: str) -> int | None:
    """The number after ``key`` in a flat-keyed cgroup file (``cpu.stat``, ``memory.stat``)."""
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int_of(value)
    return None


def cgroup_usage(dirs: list[str]) -> tuple[bool, float | None, int | None]:
    """(has a process, CPU seconds, working-set bytes) of one cgroup, in any tree it has:
    v1 splits controllers over trees, v2 keeps them in one directory."""
    alive = False
    cpu: float | None = None
    memory: int | None = None
    for d in dirs:
        if not alive and (_read(f"{d}/cgroup.procs") or "").strip():
            alive = True
        if cpu is None:
            ns = int_of(_read(f"{d}/cpuacct.usage"))
            if ns is not None:
                cpu = ns / 1e9
            else:
                usec = keyed_number(_read(f"{d}/cpu.stat"), "usage_usec")
                cpu = None if usec is None else usec / 1e6
        if memory is None:
            v1 = int_of(_read(f"{d}/memory.usage_in_bytes"))
            if v1 is not None:
                inactive = keyed_number(_read(f"{d}/memory.stat"), "total_inactive_file") or 0
                memory = max(0, v1 - inactive)
            else:
                v2 = int_of(_read(f"{d}/memory.current"))
                if v2 is not None:
                    inactive = keyed_number(_read(f"{d}/memory.stat"), "inactive_file") or 0
                    memory = max(0, v2 - inactive)
    return alive, cpu, memory


def session_usage(sessions: set[int]) -> dict[int, tuple[float, int]]:
    """CPU seconds and RSS bytes of every live process in each session, from /proc."""
    found: dict[int, tuple[float, int]] = {}
    if not sessions:
        return found
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        text = _read(f"/proc/{name}/stat")
        if text is None:
            continue  # it ended since the listing: normal
        fields = text.rsplit(")", 1)[-1].split()
        try:
            if fields[0] == "Z" or int(fields[3]) not in sessions:
                continue
            ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # u/s time, + reaped kids'
            rss = int(fields[21]) * _PAGE
        except (IndexError, ValueError):
            continue
        cpu, memory = found.get(int(fields[3]), (0.0, 0))
        found[int(fields[3])] = (cpu + ticks / _CLOCK_TICKS, memory + rss)
    return found


def prepare(env: Mapping[str, str], account: tuple[int, int] | None = None) -> None:
    """Make the metrics directory before the ranks start (only its last part: the run
    dir must exist here), so that pods are sampled whether or not their ranks call
    ``report``.  Not for root on an account's behalf: that directory is in the
    account's home, where root following a planted link could be led anywhere, and
    the server makes it as the account (``local/homes.py``).  Errors are left to
    whoever writes."""
    folder = env.get(METRICS_DIR)
    if account is not None and account[0] != os.geteuid():
        return
    if not folder or os.path.isdir(folder) or not os.path.isdir(os.path.dirname(folder)):
        return
    with contextlib.suppress(OSError):
        os.mkdir(folder, 0o755)


def _mpi_rank_envs(argv: Sequence[str]) -> list[dict[str, str]]:
    """The ranks' own environments in an mpirun command line (``launch.mpirun``)."""
    prefix = f"{RANK_ENV}="
    for flag, value in itertools.pairwise(argv):
        if flag == "-x" and value.startswith(prefix):
            try:
                found = json.loads(value[len(prefix) :])
            except ValueError:
                return []
            if isinstance(found, dict):
                return [
                    {str(k): str(v) for k, v in e.items()}
                    for e in found.values()
                    if isinstance(e, dict)
                ]
    return []


def process_usage(pids: set[int]) -> dict[int, tuple[float, int]]:
    """CPU seconds and RSS bytes of each process alone (not its children), from /proc."""
    found: dict[int, tuple[float, int]] = {}
    for pid in pids:
        fields = (_read(f"/proc/{pid}/stat") or "").rsplit(")", 1)[-1].split()
        try:
            if fields[0] != "Z":
                ticks = int(fields[11]) + int(fields[12])
                found[pid] = (ticks / _CLOCK_TICKS, int(fields[21]) * _PAGE)
        except (IndexError, ValueError):
            continue  # it ended: normal
    return found


class _PodFile:
    """One pod's samples file: appended, bounded, never through a link."""

    def __init__(self, folder: str, pod: str) -> None:
        self.folder, self.name = folder, file_name(pod)
        self.path = os.path.join(folder, self.name)
        self.fd: int | None = None
        self.size = 0
        self.done = False  # capped or broken: nothing more is written

    def _open(self) -> bool:
        """Open (create) the file; False while its directory does not exist yet.

        The agent may be root and the directory the account's: the directory is
        reached as ``tenantfs`` reaches one (from a directory only root or we can
        change, through no link), the file is created in it through that descriptor
        without following one, and must be a regular file with no other name."""
        from ringleader import tenantfs  # only where a server asks for samples

        try:
            dir_fd = tenantfs.open_dir(self.folder)
        except FileNotFoundError:
            return False  # the directory comes with the first rank's report
        except OSError as exc:
            self._stop("are not recorded", exc)
            return False
        fd = None
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(self.name, flags | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
            info = os.fstat(fd)
            if not (stat.S_ISREG(info.st_mode) and info.st_nlink == 1):
                raise OSError("not a regular file of its own")
            folder = os.fstat(dir_fd)
            if info.st_uid != folder.st_uid:  # the directory's owner's, as tenantfs reads
                os.fchown(fd, folder.st_uid, folder.st_gid)
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            self._stop("are not recorded", exc)
            return False
        finally:
            os.close(dir_fd)
        self.fd, self.size = fd, info.st_size
        return True

    def _stop(self, what: str, exc: OSError) -> None:
        self.done = True
        print(f"ringleader: pod resources {what} ({self.path}: {exc})", file=sys.stderr)

    def write(self, record: dict[str, object]) -> None:
        if self.done or (self.fd is None and not self._open()) or self.fd is None:
            return
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        if self.size + len(line) > MAX_FILE_BYTES:
            line, self.done = b'{"capped": true}\n', True
        try:
            os.write(self.fd, line)
            self.size += len(line)
        except OSError as exc:  # a full disk: stop sampling this pod, keep training
            self._stop("stopped", exc)

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class _Pod:
    def __init__(self, folder: str, name: str, cgroup: list[str]):
        self.name = name
        self.cgroup = cgroup  # its cgroup's directories ([]: none, sum its ranks' sessions)
        self.leaders: set[int] = set()
        self.alone = False  # its leaders' own use, not their sessions' (mpirun's pod)
        self.file = _PodFile(folder, name)
        self.last: tuple[float, float] | None = None  # (monotonic time, CPU seconds)


class Sampler:
    """Samples the pods of the ranks it is told about, on a daemon thread."""

    def __init__(self, interval_s: float = INTERVAL_S, first_s: float = FIRST_SAMPLE_S) -> None:
        self.interval_s, self.first_s = interval_s, first_s
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.thread: threading.Thread | None = None

    def watch(self, pid: int, env: Mapping[str, str], argv: Sequence[str] = ()) -> None:
        """Sample ``pid``'s pod (its session, or its cgroup) from now on; a rank
        without a metrics directory or a pod name is not sampled.

        ``argv``: an MPI launcher's (mpirun's) command line, whose ranks are its
        children but belong to the worker pods: their pods are read from their
        cgroups (named in mpirun's ``-x RINGLEADER_RANK_ENV=``), which only the
        local backend makes, and the launcher pod is mpirun alone."""
        folder = env.get(METRICS_DIR)
        if not folder:
            return
        workers = _mpi_rank_envs(argv)
        with self.lock:
            self._add(folder, env, pid, alone=bool(workers))
            for rank_env in workers:
                if rank_env.get(CGROUP_VAR):
                    self._add(folder, rank_env, None)
            if self.pods and self.thread is None:
                self.thread = threading.Thread(target=self._loop, daemon=True, name="podstats")
                self.thread.start()

    def _add(self, folder: str, env: Mapping[str, str], pid: int | None, alone: bool = False):
        pod = env.get(POD_VAR)
        if not pod or "/" in pod or pod in (".", ".."):
            return
        key = (folder, pod)
        if key not in self.pods:
            cgroup = [os.path.dirname(p) for p in (env.get(CGROUP_VAR) or "").split()]
            self.pods[key] = _Pod(folder, pod, cgroup)
        if pid is not None:
            self.pods[key].leaders.add(pid)
            self.pods[key].alone = alone

    def forget(self, pid: int) -> None:
        """``pid`` ended: its number may be reused, by a stranger."""
        with self.lock:
            for pod in self.pods.values():
                pod.leaders.discard(pid)

    def close(self) -> None:
        self.closed.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=5.0)
        with self.lock:
            for pod in self.pods.values():
                pod.file.close()

    def _loop(self) -> None:
        delay = self.first_s
        while not self.closed.wait(delay):
            try:
                self.sample()
            except Exception as exc:  # a bug here must not end the run
                print(f"ringleader: pod resources: {exc!r}", file=sys.stderr)
            delay = self.interval_s

    def sample(self) -> None:
        """One sample of every pod with a live process, appended to its file."""
        with self.lock:
            pods = [p for p in self.pods.values() if not p.file.done]
            leaders = {p: set(p.leaders) for p in pods}
        sessions = {pid for pod in pods if not pod.cgroup and not pod.alone for pid in leaders[pod]}
        alone = process_usage({pid for pod in pods if pod.alone for pid in leaders[pod]})
        # A cgroup without a memory controller (v2 without it) falls back to sessions too.
        measured: dict[_Pod, tuple[bool, float | None, int | None]] = {}
        for pod in pods:
            if pod.cgroup:
                measured[pod] = kernel = cgroup_usage(pod.cgroup)
                if kernel[1] is None or kernel[2] is None:
                    sessions |= leaders[pod]
        by_session = session_usage(sessions)
        wall, now = time.time(), time.monotonic()
        for pod in pods:
            usage = alone if pod.alone else by_session
            mine = [usage[s] for s in leaders[pod] if s in usage]
            alive, cpu_s, memory = measured.get(pod, (False, None, None))
            alive = alive or bool(mine)
            if not alive:
                continue  # not started here yet, or ended: nothing to say
            if cpu_s is None and mine:
                cpu_s = sum(c for c, _ in mine)
            if memory is None and mine:
                memory = sum(m for _, m in mine)
            cores = None
            if cpu_s is not None and pod.last is not None and now > pod.last[0]:
                cores = round(max(0.0, (cpu_s - pod.last[1]) / (now - pod.last[0])), 3)
            if cpu_s is not None:
                pod.last = (now, cpu_s)
            pod.file.write({"time": round(wall, 3), "cpu": cores, "memoryBytes": memory})
