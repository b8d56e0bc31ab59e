"""Hostile output and a hostile /tmp (issue 12): bounded lines, private run dirs.

A rank that writes megabytes without a newline gets its output forwarded in
marked pieces of at most LINE_CAP bytes, every byte kept, with work linear in
the bytes (counted, never timed). The agent's run dir is a fresh private
directory: whatever someone planted at the old predictable path
(``<tmp>/ringleader-<job-id>/node-N``) is neither followed nor reused.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from ringleader.launch.lines import LineSplitter, piece_text
from ringleader.launch.protocol import LINE_CAP, SPLIT_MARK, bounded_lines
from ringleader.launch.rank_process import private_dir
from tests.conftest import job_pids, launch

# ----- the splitter -------------------------------------------------------------------


class CountingBytes(bytes):
    """Bytes whose ``find`` adds the length of every range it searches to ``scanned``."""

    scanned = 0

    def find(self, sub, start=None, end=None):  # type: ignore[override]
        lo = 0 if start is None else start
        hi = len(self) if end is None else end
        CountingBytes.scanned += max(0, hi - lo)
        return super().find(sub, start, end)


def _feed_all(splitter: LineSplitter, data: bytes, chunk: int) -> list[tuple[bytes, bool]]:
    pieces = []
    for at in range(0, len(data), chunk):
        pieces += splitter.feed(CountingBytes(data[at : at + chunk]))
        assert len(splitter.pending) <= splitter.cap  # never more than one piece held
    return pieces + splitter.close()


def _rebuilt(pieces: list[tuple[bytes, bool]]) -> bytes:
    return b"".join(p if split else p + b"\n" for p, split in pieces)


@pytest.mark.parametrize("chunk", [65536, 1 << 30], ids=["pipe-sized reads", "one huge read"])
def test_splitting_scans_each_byte_once_however_long_the_line(chunk: int) -> None:
    cap = 64 * 1024
    per_byte = []
    for size in (cap * 4, cap * 16, cap * 64):  # growing lines without a newline
        data = bytes(i % 251 for i in range(size)).replace(b"\n", b"x")
        CountingBytes.scanned = 0
        pieces = _feed_all(LineSplitter(cap), data, chunk)
        assert all(len(p) <= cap for p, _ in pieces)
        assert [split for _, split in pieces] == [True] * (len(pieces) - 1) + [False]
        assert _rebuilt(pieces) == data + b"\n"
        per_byte.append(CountingBytes.scanned / size)
    # Linear: the bytes searched per input byte stay at 1 (plus one look-ahead byte
    # per piece), whatever the length; the old split-the-whole-buffer grew with it.
    assert max(per_byte) <= 1 + 1 / 1000, per_byte
    assert max(per_byte) - min(per_byte) <= 1 / 1000, per_byte


def test_short_lines_pass_whole_and_a_line_of_exactly_the_cap_is_not_split() -> None:
    cap = 16
    data = b"one\r\ntwo\n" + b"a" * cap + b"\n" + b"b" * (cap + 1) + b"\nlast"
    for chunk in (1, 3, 7, len(data)):
        pieces = _feed_all(LineSplitter(cap), data, chunk)
        assert pieces == [
            (b"one", False),
            (b"two", False),
            (b"a" * cap, False),
            (b"b" * cap, True),
            (b"b", False),
            (b"last", False),
        ], chunk


def test_a_split_never_tears_a_utf8_character() -> None:
    text = "añ€😀" * 5000  # 1-, 2-, 3- and 4-byte characters
    pieces = _feed_all(LineSplitter(4099), text.encode(), 1000)
    assert len(pieces) > 2
    for piece, _ in pieces:
        piece.decode("utf-8")  # strict: each piece is whole characters
    assert "".join(p.decode() for p, _ in pieces) == text
    assert piece_text(b"x", True) == "x" + SPLIT_MARK


def test_the_launcher_reads_bounded_messages(tmp_path: Path) -> None:
    path = tmp_path / "stream"
    path.write_bytes(b"short\n" + b"y" * 100 + b"\n" + b"tail")
    with open(path, "rb") as stream:
        got = list(bounded_lines(stream, 10))
    assert got == [(b"short\n", True), (b"y" * 10, False), (b"tail", True)]


# ----- a real launch --------------------------------------------------------------------

HUGE_LINE = """
import sys
payload = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 600_000)[:20_000_000]
out = sys.stdout.buffer
for at in range(0, len(payload), 300_000):  # 20 MB in writes, not one newline
    out.write(payload[at : at + 300_000])
    out.flush()
out.write(b"\\nafter\\n")
out.flush()
"""


def test_a_20mb_line_arrives_in_marked_pieces_of_at_most_the_cap(script) -> None:
    proc = launch("-n", "1", "--run-id", "rl-hugeline", "--", "python", script(HUGE_LINE))
    assert proc.returncode == 0, proc.stderr[-2000:]
    prefix = "[0/1 localhost] "
    lines = proc.stdout.split("\n")
    assert lines[-1] == "" and lines[-2] == prefix + "after"
    pieces = lines[:-2]
    assert all(line.startswith(prefix) for line in pieces)
    pieces = [line[len(prefix) :] for line in pieces]
    assert all(p.endswith(SPLIT_MARK) for p in pieces[:-1])
    assert not pieces[-1].endswith(SPLIT_MARK)
    bodies = [p.removesuffix(SPLIT_MARK) for p in pieces[:-1]] + [pieces[-1]]
    assert all(len(b.encode()) <= LINE_CAP for b in bodies)
    assert len(bodies) == -(-20_000_000 // LINE_CAP)
    expected = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 600_000)[:20_000_000]
    assert "".join(bodies).encode() == expected  # every byte, in order
    assert job_pids("rl-hugeline") == []


# ----- private run dirs ------------------------------------------------------------------

WHERE = """
import os, stat
run = os.path.dirname(os.environ["RINGLEADER_HOSTFILE"])
st = os.lstat(run)
print(f"RUNDIR {run} mode={stat.S_IMODE(st.st_mode):o} uid={st.st_uid} "
      f"link={os.path.islink(run)}", flush=True)
"""


def _rundirs(stdout: str) -> list[re.Match[str]]:
    return list(re.finditer(r"RUNDIR (\S+) mode=(\d+) uid=(\d+) link=(\w+)", stdout))


def test_a_planted_symlink_or_foreign_directory_is_never_used(script, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)  # like /tmp: anyone may create entries
    victim = tmp_path / "victim"  # where a planted link would send our files
    victim.mkdir()
    (tmp / "ringleader-rl-planted").symlink_to(victim)
    foreign = tmp / "ringleader-rl-foreign"  # someone else's directory, open to all
    (foreign / "node-0").mkdir(parents=True)
    for d in (foreign, foreign / "node-0"):
        d.chmod(0o777)
        if os.geteuid() == 0:
            os.chown(d, 65534, 65534)  # nobody's, as another user would leave it
    env = {"TMPDIR": str(tmp)}
    for run_id in ("rl-planted", "rl-foreign"):
        proc = launch("-n", "2", "--run-id", run_id, "--", "python", script(WHERE), env=env)
        assert proc.returncode == 0, proc.stderr
        seen = _rundirs(proc.stdout)
        assert len(seen) == 2
        for match in seen:
            run, mode, uid, link = match.groups()
            assert Path(run).parent == tmp and Path(run).name.startswith(f"ringleader-{run_id}-")
            assert (mode, int(uid), link) == ("700", os.geteuid(), "False")
        assert not Path(seen[0].group(1)).exists()  # removed at the end
        assert job_pids(run_id) == []
    assert list(victim.iterdir()) == []  # nothing written through the link
    assert [p.name for p in foreign.rglob("*")] == ["node-0"]  # nothing added to theirs
    assert (tmp / "ringleader-rl-planted").is_symlink()  # theirs are left as they were
    assert sorted(p.name for p in tmp.iterdir()) == [
        "ringleader-rl-foreign",
        "ringleader-rl-planted",
    ]


def test_private_dir_skips_a_name_taken_in_any_form(tmp_path: Path, monkeypatch) -> None:
    names = iter([b"\x00" * 8, b"\x01" * 8, b"\x02" * 8])
    monkeypatch.setattr(os, "urandom", lambda n: next(names))
    (tmp_path / ("p-" + "00" * 8)).symlink_to(tmp_path / "elsewhere")
    (tmp_path / ("p-" + "01" * 8)).mkdir(mode=0o777)
    made = Path(private_dir(str(tmp_path), "p-"))
    assert made.name == "p-" + "02" * 8
    assert stat.S_IMODE(made.lstat().st_mode) == 0o700 and not made.is_symlink()
    assert not (tmp_path / "elsewhere").exists()


def test_state_files_are_never_written_through_a_planted_link(tmp_path: Path) -> None:
    from ringleader.launch.detached import read_json, write_json_atomic

    victim = tmp_path / "victim"
    victim.write_text("untouched")
    state = tmp_path / "state.json"
    (tmp_path / f".state.json.{os.getpid()}.tmp").symlink_to(victim)  # the old temp name
    write_json_atomic(state, {"phase": "Running"})
    assert read_json(state) == {"phase": "Running"} and not state.is_symlink()
    assert victim.read_text() == "untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".state.json.{os.getpid()}.tmp",
        "state.json",
        "victim",
    ]  # no temporary file left behind


def test_a_failures_summary_keeps_a_bounded_piece_of_each_long_stderr_line(script) -> None:
    from tests.conftest import launch

    body = "import sys; sys.stderr.write('E' * 3_000_000 + '\\n'); sys.exit(3)"
    proc = launch("-n", "1", "--run-id", "rl-longerr", "--", "python", script(body))
    assert proc.returncode == 3
    summary = proc.stderr[proc.stderr.index("Root Cause") :]
    assert "[...]" in summary
    assert len(summary) < 64_000  # the 3 MB line itself went by above, in pieces
