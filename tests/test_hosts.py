"""Host inventories: every format users bring, and errors that point at file:line."""

from __future__ import annotations

import pytest

from ringleader.errors import InvalidSpec
from ringleader.hosts import (
    Host,
    is_local_address,
    load_hostfile,
    parse_host_list,
    parse_hosts_json,
    parse_mpi_hostfile,
    to_mpi_hostfile,
    with_slots,
)


def test_mpi_hostfile_with_comments_blank_lines_and_slots() -> None:
    text = "# cluster\n\n10.85.100.220 slots=1\nnode-b slots=4 max_slots=8  # big one\nnode-c\n"
    hosts = parse_mpi_hostfile(text, "hf")
    assert hosts == [
        Host("10.85.100.220", "10.85.100.220", 1),
        Host("node-b", "node-b", 4),
        Host("node-c", "node-c", 1),
    ]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("a slots=2\nb slots=zero\n", 2, "slots must be a positive integer"),
        ("a slots=0\n", 1, "slots must be a positive integer"),
        ("a\n\n# c\nb gpus=2\n", 4, "unknown field 'gpus'"),
        ("a slots 2\n", 1, "expected key=value"),
        ("bad;host slots=1\n", 1, "invalid host name"),
        ("-oProxyCommand=x slots=1\n", 1, "invalid host name"),
    ],
)
def test_mpi_hostfile_errors_name_file_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        parse_mpi_hostfile(text, "hosts.txt")
    assert str(err.value).startswith(f"hosts.txt:{line}: ")
    assert problem in str(err.value)


def test_empty_hostfile_is_an_error() -> None:
    with pytest.raises(InvalidSpec, match="no hosts"):
        parse_mpi_hostfile("# nothing\n\n", "empty")


def test_hosts_json_list_form_uses_ips0_as_address() -> None:
    text = '[{"ssh": "mm@mini1", "ips": ["10.0.0.1", "192.168.1.5"]}, {"ssh": "mini2", "ips": []}]'
    hosts = parse_hosts_json(text)
    assert hosts[0] == Host("mm@mini1", "10.0.0.1", 1)
    assert hosts[0].name == "mini1"
    assert hosts[1] == Host("mini2", "mini2", 1)


def test_hosts_json_object_form() -> None:
    text = (
        '{"backend": "ring", "envs": [], "hosts": [{"ssh": "a", "ips": ["10.1.1.1"], "rdma": []}]}'
    )
    assert parse_hosts_json(text) == [Host("a", "10.1.1.1", 1)]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[{"ssh": "a"},\n {"ips": ["1.2.3.4"]}]', "hosts.json:2", 'missing "ssh"'),
        ('[\n  {"ssh": "a",}\n]', "hosts.json:2", "invalid JSON"),
        ('{"nodes": []}', "hosts.json:1", '"hosts"'),
        ("[]", "hosts.json:1", "non-empty"),
        ('[{"ssh": "a", "ips": "10.0.0.1"}]', "hosts.json:1", '"ips" must be a list'),
    ],
)
def test_hosts_json_errors(text: str, where: str, problem: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        parse_hosts_json(text, "hosts.json")
    assert str(err.value).startswith(where)
    assert problem in str(err.value)


def test_host_list_flag() -> None:
    assert parse_host_list("a:2,b:2,c") == [Host("a", "a", 2), Host("b", "b", 2), Host("c", "c", 1)]
    with pytest.raises(InvalidSpec, match="-H item 2"):
        parse_host_list("a:2,b:x")
    with pytest.raises(InvalidSpec, match="empty host"):
        parse_host_list("a:2,,b")


def test_load_hostfile_detects_json_and_reports_missing_file(tmp_path) -> None:
    (tmp_path / "hosts").write_text('[{"ssh": "a", "ips": ["10.0.0.9"]}]')
    assert load_hostfile(tmp_path / "hosts")[0].address == "10.0.0.9"
    with pytest.raises(InvalidSpec, match="cannot read hostfile"):
        load_hostfile(tmp_path / "nope")


def test_conversion_to_mpi_hostfile_matches_the_seed() -> None:
    hosts = parse_hosts_json(
        '[{"ssh": "m1", "ips": ["10.85.100.220"]}, {"ssh": "m2", "ips": ["10.85.100.221"]},'
        ' {"ssh": "m3", "ips": ["10.85.100.222"]}]'
    )
    assert to_mpi_hostfile(hosts) == (
        "10.85.100.220 slots=1\n10.85.100.221 slots=1\n10.85.100.222 slots=1\n"
    )
    assert [h.slots for h in with_slots(hosts, 2)] == [2, 2, 2]


def test_a_machine_listed_several_times_is_one_hostfile_line() -> None:
    """mpirun refuses a hostfile that gives one host's slot count twice."""
    hosts = parse_hosts_json(
        '[{"ssh": "mac1", "ips": ["10.0.0.1"]}, {"ssh": "mac2", "ips": ["10.0.0.2"]},'
        ' {"ssh": "mac1", "ips": ["10.0.0.1"]}]'
    )
    assert to_mpi_hostfile(hosts) == "10.0.0.1 slots=2\n10.0.0.2 slots=1\n"
    assert to_mpi_hostfile(with_slots(hosts, 2)) == "10.0.0.1 slots=4\n10.0.0.2 slots=2\n"


def test_local_addresses() -> None:
    assert is_local_address("localhost")
    assert is_local_address("127.0.0.1")
    assert is_local_address("127.3.4.5")
    assert not is_local_address("10.254.254.254")
    assert not is_local_address("example.invalid")
