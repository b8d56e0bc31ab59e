"""mpirun's tagged output back to whole rank lines (pure; ``launch/mpi_output``)."""

from __future__ import annotations

from ringleader.hosts import Host
from ringleader.launch.mpi_output import MPIRUN, RankLine, TaggedStream, agent_split
from ringleader.launch.mpirun import hostfile_text, merged_hosts
from ringleader.launch.protocol import SPLIT_MARK


def feed(stream: TaggedStream, *pieces: str) -> list[tuple[int, str]]:
    return [(x.rank, x.text) for p in pieces for x in stream.feed(p, "stdout")]


def test_a_tag_glued_to_an_unfinished_line_goes_to_its_own_rank() -> None:
    # What mpirun 4.1 writes for: rank 0 "part1-0" ... "-part2\n", rank 1 a 10 KB line.
    s = TaggedStream(world_size=2)
    assert feed(
        s,
        "[1,0]<stdout>:part1-0[1,1]<stdout>:" + "A" * 4095 + "[1,1]<stdout>:" + "A" * 1810,
        "[1,1]<stdout>:part1-1[1,0]<stdout>:-part2",
        "[1,0]<stdout>:z[1,1]<stdout>:-part2",
    ) == [(1, "A" * 5905), (0, "part1-0-part2"), (1, "part1-1-part2")]
    assert feed(s, "[1,1]<stdout>:z[1,0]<stdout>:", "[1,1]<stdout>:") == [(0, "z"), (1, "z")]


def test_mpiruns_own_lines_and_empty_lines() -> None:
    s = TaggedStream(world_size=2)
    assert feed(s, "-----", "[1,0]<stdout>:", "mpirun noticed that process rank 1") == [
        (MPIRUN, "-----"), (0, ""), (MPIRUN, "mpirun noticed that process rank 1"),
    ]  # fmt: skip


def test_a_tag_for_a_rank_outside_the_world_is_text() -> None:
    s = TaggedStream(world_size=2)
    assert feed(s, "[1,0]<stdout>:see [1,7]<stdout>: here") == [(0, "see [1,7]<stdout>: here")]


def test_stderr_and_stddiag_are_stderr() -> None:
    s = TaggedStream(world_size=2)
    lines = s.feed("[1,1]<stddiag>:diag[1,0]<stderr>:err", "stderr")
    assert lines == [RankLine(0, "stderr", "err")]
    assert s.flush() == [RankLine(1, "stderr", "diag")]


def test_a_piece_the_agent_cut_goes_on_in_the_next_even_inside_a_tag() -> None:
    cap = 64
    s = TaggedStream(world_size=2, cap=cap)
    first = "[1,0]<stdout>:" + "x" * 40 + "[1,1]<std"  # 63 chars: cut by the agent at cap
    first = first + "o"  # 64
    assert agent_split(first + SPLIT_MARK, cap) == (first, True)
    assert feed(s, first + SPLIT_MARK) == []
    assert feed(s, "ut>:yy", "[1,0]<stdout>:end") == [(1, "yy"), (0, "x" * 40 + "end")]
    untagged = "[1,1]<stdout>:" + "q" * 50
    assert feed(s, untagged + SPLIT_MARK, "qq") == [(1, "q" * 52)]


def test_a_ranks_own_marked_piece_is_a_whole_line() -> None:
    s = TaggedStream(world_size=1, cap=1024)
    assert feed(s, "[1,0]<stdout>:abc" + SPLIT_MARK, "[1,0]<stdout>:def") == [
        (0, "abc" + SPLIT_MARK), (0, "def"),
    ]  # fmt: skip


def test_what_is_held_per_rank_is_bounded() -> None:
    s = TaggedStream(world_size=1, cap=10)
    lines = feed(s, *["[1,0]<stdout>:" + "y" * 6 + "[1,0]<stdout>:" + "y" * 6 + "[1,0]<stdout>:"])
    assert lines[0] == (0, "y" * 10 + SPLIT_MARK)


def test_repeated_hosts_become_one_line_with_their_slots_summed() -> None:
    hosts = [Host("localhost", "127.0.0.1", 1), Host("10.0.0.2", "10.0.0.2", 2),
             Host("127.0.0.1", "127.0.0.1", 1), Host("10.0.0.2", "10.0.0.2", 1)]  # fmt: skip
    assert hostfile_text(hosts) == "localhost slots=2\n10.0.0.2 slots=3\n"
    assert [h.slots for _, h in merged_hosts(hosts)] == [2, 3]


def test_mpiruns_setpgid_race_warning_is_not_shown() -> None:
    """OpenMPI's rsh launcher warns when its setpgid of a child loses the race with the
    child's exec: nothing a user can act on, kept out of the output; other words stay."""
    from ringleader.launch.mpi import benign

    said = "[vm:01234] plm:rsh: Warning: setpgid(5678,5678) failed in parent with errno=Permission denied(13)"
    assert benign(said)
    assert not benign("plm:rsh: Error: setpgid(0,0) failed in child with errno=EPERM(1)")
    assert not benign("mpirun noticed that process rank 1 with PID 9 on node a exited on signal 9")
