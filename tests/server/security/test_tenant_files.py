"""Files a tenant can write are never opened by root code unsafely (issue 22, part H1).

A real root ``ringleader server --run-as user`` (``tests/fixtures/tenants.py``): each
workload's ranks run as its user's OS account and plant, in the files the root
agent and server read back (its error file, its ``.ended`` marker, its metrics
directory), a symbolic link to the server's credentials or ``/etc/shadow``, a
FIFO, a 1 GiB sparse file, a directory swapped for a link to another user's
records, and more metrics files than a request reads.  Each attack must fail:
nothing secret comes back, nothing hangs, nothing is read whole, no 500.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import httpx

from ringleader.server.accounts import mapped_name
from ringleader.server.services import metric_files
from tests.conftest import wait_until
from tests.fixtures.tenants import Site, tenant_site  # noqa: F401 (the fixture: site)

ERROR_FILE = '"$TORCHELASTIC_ERROR_FILE"'
MARKER = '"${TORCHELASTIC_ERROR_FILE%.error.json}.ended"'  # teardown.ended_file


def _api(site: Site) -> httpx.Client:
    """An HTTP client with the admin's token: what the API answers anyone who may look."""
    token = site.token()
    return httpx.Client(
        base_url=site.server.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
    )


def _everything_shown(site: Site, api: httpx.Client, name: str) -> str:
    """describe, logs, the workload's, its pods' and its events' JSON: all a user sees."""
    wid = site.workload_id(name)
    shown = [site.server.cli("describe", name).stdout, site.server.cli("logs", name).stdout]
    for path in ("", "/pods", "/events"):
        answer = api.get(f"/api/v1/workloads/{wid}{path}")
        assert answer.status_code == 200, answer.text
        shown.append(answer.text)
    return "\n".join(shown)


def _sh(site: Site, creds: tuple[str, str], name: str, script: str) -> None:
    site.submit(creds, name, "sh", "-c", script)


def test_error_files_and_markers_planted_as_links_fifos_or_sparse_files(site: Site) -> None:
    """(a) credentials.json, (b) /etc/shadow, (c) a FIFO, (d) a 1 GiB sparse file as the
    rank's error file; (e) the .ended marker as a link or a FIFO.  Every workload ends
    Failed (nothing hangs) and nothing of what the links point at is shown."""
    eve = site.user("eve")
    credentials = site.server.home / "credentials.json"
    attacks = {
        "creds": f"ln -sf {credentials} {ERROR_FILE}; exit 3",
        "shadow": f"ln -sf /etc/shadow {ERROR_FILE}; exit 3",
        "fifo": f"rm -f {ERROR_FILE}; mkfifo {ERROR_FILE}; exit 3",
        "sparse": f"truncate -s 1G {ERROR_FILE}; exit 3",
        "endlink": f"ln -sf {credentials} {MARKER}; ln -sf /etc/shadow {ERROR_FILE}; exit 3",
        "endfifo": f"mkfifo {MARKER}; exit 3",
    }
    for name, script in attacks.items():
        _sh(site, eve, name, script)
    secrets = json.loads(credentials.read_text())
    shadow = [line for line in Path("/etc/shadow").read_text().splitlines() if line]
    with _api(site) as api:
        for name in attacks:
            site.wait_phase(name, "Failed")
            shown = _everything_shown(site, api, name)
            for secret in (secrets["clientId"], secrets["clientSecret"], *shadow[:3]):
                assert secret not in shown, (name, secret)
            if name == "sparse":  # the stored failure text is capped, not 1 GiB
                assert len(shown) < 512 * 1024, len(shown)


def _metrics_writer(lines: str, then: str = "") -> str:
    """Rank 0 writes report()'s records itself, then does ``then``."""
    return (
        "import json, os, sys, time\n"
        "if os.environ['RANK'] != '0':  # one writer: the gang's other rank is done\n"
        "    sys.exit(0)\n"
        "folder = os.environ['RINGLEADER_METRICS_DIR']\n"
        f"{lines}\n"
        "print('WROTE', flush=True)\n"
        f"{then}\n"
    )


def test_a_swapped_metrics_directory_never_shows_another_users_records(site: Site) -> None:
    """(f) eve's rank keeps exchanging its metrics directory with a link to frank's
    (renameat2 RENAME_EXCHANGE) while her metrics are read: never frank's, never a 500."""
    frank = site.user("frank")
    write_frank = (
        "with open(os.path.join(folder, 'rank-0.attempt-0.jsonl'), 'w') as f:\n"
        "    f.write(json.dumps({'step': 7, 'time': time.time(), 'loss': 777.0}) + '\\n')"
    )
    frank_script = site.script("frank_metrics.py", _metrics_writer(write_frank))
    frank_id = site.submit(frank, "franks-metrics", "python", frank_script)
    site.wait_logs("franks-metrics", "WROTE")
    frank_home = pwd.getpwnam(mapped_name("frank", f"{site.prefix}-{{user}}")).pw_dir
    frank_dir = f"{frank_home}/ringleader/{frank_id}/metrics"
    assert os.path.isfile(f"{frank_dir}/rank-0.attempt-0.jsonl")  # there for root to read
    eve = site.user("eve-swap")
    swap = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "with open(os.path.join(folder, 'rank-0.attempt-0.jsonl'), 'w') as f:\n"
        "    f.write(json.dumps({'step': 1, 'time': time.time(), 'loss': 1.0}) + '\\n')\n"
        "link = folder + '.link'\n"
        "os.symlink(sys.argv[1], link)\n"
        "print('SWAPPING', flush=True)\n"
        "deadline = time.time() + 90\n"
        "while time.time() < deadline:\n"
        "    assert libc.renameat2(-100, link.encode(), -100, folder.encode(), 2) == 0\n"
        "    time.sleep(0.0005)\n"
    )
    eve_script = site.script("eve_swap.py", _metrics_writer("", swap))
    eve_id = site.submit(eve, "eve-swap", "python", eve_script, frank_dir)
    site.wait_logs("eve-swap", "SWAPPING")
    seen: dict[str, int] = {}
    with _api(site) as api:
        control = api.get(f"/api/v1/workloads/{frank_id}/metrics").json()
        assert control["series"][0]["points"][0]["loss"] == 777.0  # what must not leak
        for _ in range(40):
            answer = api.get(f"/api/v1/workloads/{eve_id}/metrics")
            assert answer.status_code == 200, answer.text
            body = answer.json()
            losses = [p["loss"] for s in body["series"] for p in s["points"]]
            assert 777.0 not in losses, body
            key = "own" if losses else "empty"
            seen[key] = seen.get(key, 0) + 1
    print("eve's metrics during the swap:", seen)
    assert seen.get("own"), seen  # her own records were read while she swapped
    _assert_supervisor_memory_is_bounded(eve_id)
    assert site.server.cli("delete", "eve-swap").returncode == 0


def test_many_and_large_metrics_files_are_read_within_the_caps(site: Site) -> None:
    """(g) a rank leaves far more metrics files, and bytes, than one request may read:
    each answer reads at most the caps, says ``partial``, and the next one goes on."""
    gina = site.user("gina")
    line = json.dumps({"step": 1, "time": 1764000000.0, "loss": 0.5}) + "\n"
    many = metric_files.MAX_FILES + 100
    big_lines = metric_files.REQUEST_READ_CAP // len(line) * 2 // 3
    big = 4  # more than two caps: ``describe`` (which reads metrics too) and one request
    flood = (
        f"line = {line!r}\n"
        f"for rank in range({big}):\n"
        "    with open(os.path.join(folder, f'rank-{rank}.attempt-0.jsonl'), 'w') as f:\n"
        f"        f.write(line * {big_lines})\n"
        f"for rank in range({big}, {many}):\n"
        "    with open(os.path.join(folder, f'rank-{rank}.attempt-0.jsonl'), 'w') as f:\n"
        "        f.write(line)"
    )
    script = site.script("flood.py", _metrics_writer(flood))
    wid = site.submit(gina, "flood", "python", script)
    site.wait_logs("flood", "WROTE")
    with _api(site) as api:
        # Each answer reads at most the cap more than the last (``describe``, which the
        # helpers run, reads them too: what it read is cached, not read again).
        before = _metrics(api, wid)
        first = _metrics(api, wid)
        for answer in (before, first):
            assert answer["partial"] is True
            assert len(answer["series"]) <= metric_files.MAX_FILES
        assert (_records(first) - _records(before)) * len(line) <= metric_files.REQUEST_READ_CAP
        assert _records(first) > _records(before)  # the cache keeps what was read: it reads on
        final: dict[str, Any] = {}

        def read_on() -> bool:  # all a request may look at: the big files and small ones
            final.update(_metrics(api, wid))
            return _records(final) == big * big_lines + len(final["series"]) - big

        wait_until(read_on, timeout=120, what="the rest read by later requests")
        assert final["partial"] is True  # the files past the cap stay unread
        assert len(final["series"]) <= metric_files.MAX_FILES


def _assert_supervisor_memory_is_bounded(workload_id: str) -> None:
    """The root agent and supervisor live in a cgroup with a memory limit: whatever a
    tenant's files make them do, they cannot take the host's memory."""
    from ringleader.server.backends.local import SUPERVISOR_LIMITS, LocalBackend
    from ringleader.server.backends.local.cgroup_versions import CgroupV1

    hierarchy = LocalBackend().cgroups
    if hierarchy is None:
        return  # no cgroups here: nothing to bound with (README says so)
    rel = f"rl-{workload_id}/supervisor"
    if isinstance(hierarchy, CgroupV1):
        limit = hierarchy.parents["memory"] / rel / "memory.limit_in_bytes"
    else:
        limit = hierarchy.parents["unified"] / rel / "memory.max"
    if limit.exists():  # a v2 root that cannot hand memory down limits nothing
        assert int(limit.read_text()) == SUPERVISOR_LIMITS.memory_bytes


def _metrics(api: httpx.Client, wid: str) -> dict[str, Any]:
    answer = api.get(f"/api/v1/workloads/{wid}/metrics")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _records(body: dict[str, Any]) -> int:
    return sum(s["records"] for s in body["series"])
