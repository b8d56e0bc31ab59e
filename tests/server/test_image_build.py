"""Images built here (issue 24, item 3): ``image build`` is ``podman build`` whose
``RUN`` steps see this host's pip (its merged configuration, trust and local
package directories) and a pip cache, none of which ends up in the image; ``image
base`` made the test image itself (tests/fixtures/images.py).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

from ringleader.cluster.images import build_argv, host_pip_mounts, pip_conf
from tests.fixtures.images import podman, python_image

__all__ = ["python_image"]  # the fixture, used by name

CONFIG = """:env:.find-links='/opt/wheels'
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
global.cert='/etc/pip/other.crt'
global.extra-index-url='file:///srv/pypi/simple https://mirror.example/simple'
install.no-compile='1'
"""


def test_the_hosts_pip_settings_become_one_file_variables_winning() -> None:
    text = pip_conf(CONFIG)
    assert text == (
        "[global]\nfind-links = /opt/wheels\ncert = /etc/ssl/certs/ca-certificates.crt\n"
        "extra-index-url = file:///srv/pypi/simple https://mirror.example/simple\n"
        "[install]\nno-compile = 1\n"
    )


def test_what_the_settings_name_is_mounted_read_only_an_indexs_files_beside_it(
    tmp_path: Path,
) -> None:
    wheels, index = tmp_path / "wheels", tmp_path / "pypi" / "simple"
    wheels.mkdir()
    index.mkdir(parents=True)
    config = f":env:.find-links='{wheels}'\nglobal.index-url='file://{index}'\n"
    mounts = host_pip_mounts(config)
    assert f"{wheels}:{wheels}:ro" in mounts
    assert f"{index.parent}:{index.parent}:ro" in mounts  # simple/ links to ../files
    assert all(m.endswith(":ro") for m in mounts)
    argv = build_argv("podman", "C", "t:1", ".", "/cache", mounts, ["A=1"])
    assert argv[:4] == ["podman", "build", "--network", "host"]
    assert ("--build-arg", "A=1") in itertools.pairwise(argv)
    assert ("--volume", "/cache:/root/.cache/pip") in itertools.pairwise(argv)
    assert argv[-1] == "."


def test_a_build_sees_the_hosts_pip_and_the_image_keeps_none_of_it(
    python_image: str, tmp_path: Path
) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "hello.txt").write_text("hello\n")
    (context / "Containerfile").write_text(
        f"FROM {python_image}\nARG GREETING=none\nCOPY hello.txt /hello.txt\n"
        "RUN cat /etc/pip.conf > /seen-pip.conf && echo $GREETING > /greeting "
        "&& test -d /root/.cache/pip\n"
    )
    tag = "localhost/ringleader-test/built:1"
    done = subprocess.run(
        [sys.executable, "-m", "ringleader", "image", "build", str(context), "-t", tag,
         "--build-arg", "GREETING=hi", "--data-dir", str(tmp_path / "home")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    try:
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"built {tag} in" in done.stdout and f"next: ringleader image push {tag}" in (
            done.stdout
        )
        seen = podman("run", "--rm", tag, "sh", "-c",
                      "cat /hello.txt /greeting; cat /etc/pip.conf 2>/dev/null | wc -c; "
                      "ls /root/.cache/pip 2>/dev/null | wc -l; cat /seen-pip.conf")  # fmt: skip
        assert seen.returncode == 0, seen.stderr
        lines = seen.stdout.splitlines()
        # No byte of the host's pip.conf and no cached wheel is in the image (buildah
        # leaves the mount points, empty).
        assert lines[:4] == ["hello", "hi", "0", "0"], seen.stdout
        assert "[global]" in lines[4:], seen.stdout  # the RUN step saw the host's pip
        assert (tmp_path / "home" / "cache" / "pip").is_dir()
    finally:
        podman("rmi", "--force", tag)
    bad = subprocess.run(
        [sys.executable, "-m", "ringleader", "image", "build", str(tmp_path / "nowhere"),
         "-t", tag],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "no Containerfile at" in bad.stderr, bad.stderr
    tagless = subprocess.run(
        [sys.executable, "-m", "ringleader", "image", "build", str(context), "-t", "Bad Tag"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert tagless.returncode == 2 and "--tag" in tagless.stderr, tagless.stderr
