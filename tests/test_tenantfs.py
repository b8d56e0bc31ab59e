"""tenantfs: how root code reads a file a tenant can write (unit tests; the
attacks by real accounts on a real server are in tests/server/security/test_tenant_files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ringleader import tenantfs
from ringleader.launch import teardown
from ringleader.launch.rank_process import read_error_file

OTHER_UID = 65534  # nobody: a file or directory someone else owns


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """An anchor (ours, 0700) and a tenant directory under it."""
    anchor = tmp_path / "run"
    anchor.mkdir(mode=0o700)
    tenant = anchor / "attempt-0"
    tenant.mkdir()
    return anchor, tenant


def test_a_plain_file_is_read_up_to_its_cap(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    (tenant / "f").write_bytes(b"0123456789")
    assert tenantfs.read(str(tenant / "f"), 4, str(anchor)) == b"0123"
    assert tenantfs.read(str(tenant / "f"), 100) == b"0123456789"  # default anchor
    fd, info = tenantfs.open_file(str(tenant / "f"), str(anchor))
    try:
        assert info.st_size == 10
        assert tenantfs.read_from(fd, 6, 100) == b"6789"
        assert tenantfs.read_from(fd, 6, 2) == b"67"
    finally:
        os.close(fd)


def test_a_link_anywhere_on_the_way_is_refused(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    (tenant / "f").symlink_to(secret)
    with pytest.raises(tenantfs.Refused, match="symbolic link"):
        tenantfs.read(str(tenant / "f"), 100, str(anchor))
    (anchor / "swapped").symlink_to(tmp_path)  # a directory swapped for a link
    with pytest.raises(tenantfs.Refused, match="swapped"):
        tenantfs.read(str(anchor / "swapped" / "secret"), 100, str(anchor))
    assert tenantfs.read_or_none(str(tenant / "f"), 100, str(anchor)) is None


def test_a_fifo_a_device_and_a_directory_are_refused_without_blocking(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    os.mkfifo(tenant / "fifo")
    with pytest.raises(tenantfs.Refused, match="not a regular file"):
        tenantfs.read(str(tenant / "fifo"), 100, str(anchor))
    (tenant / "dev").symlink_to("/dev/zero")
    assert tenantfs.read_or_none(str(tenant / "dev"), 100, str(anchor)) is None
    (tenant / "dir").mkdir()
    assert tenantfs.read_or_none(str(tenant / "dir"), 100, str(anchor)) is None


def test_a_hard_link_is_refused(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    original = anchor / "original"
    original.write_text("someone else's")
    os.link(original, tenant / "f")
    with pytest.raises(tenantfs.Refused, match="hard link"):
        tenantfs.read(str(tenant / "f"), 100, str(anchor))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another account needs root")
def test_a_file_of_another_owner_in_a_tenant_directory_is_refused(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    os.chown(tenant, 4242, 4242)  # the tenant's directory
    (tenant / "own").write_text("mine")
    os.chown(tenant / "own", 4242, 4242)
    assert tenantfs.read(str(tenant / "own"), 100, str(anchor)) == b"mine"
    (tenant / "theirs").write_text("another tenant's")
    os.chown(tenant / "theirs", OTHER_UID, OTHER_UID)
    with pytest.raises(tenantfs.Refused, match="owned by uid"):
        tenantfs.read(str(tenant / "theirs"), 100, str(anchor))
    # Nor root's: with protected_hardlinks off, a tenant's hard link to a root file
    # whose other name was renamed away (shadow after passwd) has one name, root's.
    (tenant / "roots").write_text("root:$6$hash")
    with pytest.raises(tenantfs.Refused, match="owned by uid 0"):
        tenantfs.read(str(tenant / "roots"), 100, str(anchor))


def test_the_anchor_must_be_ours_and_the_path_under_it(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    (tenant / "f").write_text("x")
    with pytest.raises(tenantfs.Refused, match="not a file under"):
        tenantfs.read(str(tmp_path / "elsewhere"), 100, str(anchor))
    with pytest.raises(tenantfs.Refused, match="not a file under"):
        tenantfs.read(f"{anchor}/attempt-0/../../x", 100, str(anchor))
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)  # anyone could swap what is in it
    (open_to_all / "f").write_text("x")
    with pytest.raises(tenantfs.Refused, match="only root or this process"):
        tenantfs.read(str(open_to_all / "f"), 100, str(open_to_all))
    # the default anchor stops above it, and the file is then read from there
    assert tenantfs.trusted_prefix(str(open_to_all / "f")) == str(tmp_path)
    assert tenantfs.read(str(open_to_all / "f"), 100) == b"x"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another account needs root")
def test_the_default_anchor_stops_at_a_directory_someone_else_owns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, OTHER_UID, OTHER_UID)
    inner = home / "ringleader"
    inner.mkdir()
    assert tenantfs.trusted_prefix(str(inner / "metrics" / "f")) == str(tmp_path)


def test_a_huge_sparse_file_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    with open(tenant / "rank-0.error.json", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB, no blocks
    error = read_error_file(str(tenant / "rank-0.error.json"), str(anchor))
    assert error is not None and len(error["message"]) <= 4000


def test_error_files_and_markers_planted_as_links_or_fifos_are_not_read(tmp_path: Path) -> None:
    anchor, tenant = _tree(tmp_path)
    secret = tmp_path / "credentials.json"
    secret.write_text('{"message": "client-secret-XYZ"}')
    (tenant / "rank-0.error.json").symlink_to(secret)
    assert read_error_file(str(tenant / "rank-0.error.json"), str(anchor)) is None
    os.mkfifo(tenant / "rank-0.ended")
    assert teardown.read_marker_time(str(tenant / "rank-0.ended"), str(anchor)) is None
    (tenant / "rank-1.ended").write_text("123 1764000000.5\n")
    assert teardown.read_marker_time(str(tenant / "rank-1.ended"), str(anchor)) == 1764000000.5
    (tenant / "rank-2.ended").write_text("123 nan\n")
    assert teardown.read_marker_time(str(tenant / "rank-2.ended"), str(anchor)) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="lchown to another account needs root")
def test_only_a_link_root_or_we_made_on_a_trusted_way_is_followed(tmp_path: Path) -> None:
    """/var -> /private/var (macOS): a system link on the way is no tenant's doing."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "f").write_text("ok")
    (tmp_path / "alias").symlink_to(real)  # ours, in a directory only we can change
    assert tenantfs.read(str(tmp_path / "alias" / "f"), 10) == b"ok"
    assert tenantfs.trusted_prefix(str(tmp_path / "alias" / "f")) == str(real)
    (tmp_path / "planted").symlink_to(real)
    os.lchown(tmp_path / "planted", OTHER_UID, OTHER_UID)  # someone else's link
    with pytest.raises(tenantfs.Refused, match="symbolic link"):
        tenantfs.read(str(tmp_path / "planted" / "f"), 10)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, OTHER_UID, OTHER_UID)
    (tmp_path / "toshared").symlink_to(shared)  # ours, but to a directory not trusted
    assert tenantfs.trusted_prefix(str(tmp_path / "toshared" / "f")) == str(tmp_path)
