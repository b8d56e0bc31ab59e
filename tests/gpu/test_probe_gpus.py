"""nvidia-smi's facts as the probes report them (``doctor``'s facts, ``nodes
add``'s node probe, the server's local node) agree with what torch sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ringleader.cluster import doctor, probe
from ringleader.server import inventory

MIB = 2**20


@pytest.fixture(autouse=True)
def _all_devices() -> None:
    """nvidia-smi lists every device whatever CUDA_VISIBLE_DEVICES says; torch must too."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        pytest.skip("CUDA_VISIBLE_DEVICES is set: torch sees a subset of nvidia-smi's devices")


def _torch_devices() -> list[tuple[str, int]]:
    """(name, total bytes) of every device torch sees, sorted: CUDA's default order
    (fastest first) may differ from nvidia-smi's (PCI bus) on mixed machines."""
    return sorted(
        (torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory)
        for i in range(torch.cuda.device_count())
    )


def _close(smi_bytes: int, torch_bytes: int) -> bool:
    """nvidia-smi rounds to MiB and may reserve a little more than CUDA reports."""
    return abs(smi_bytes - torch_bytes) <= max(64 * MIB, 0.02 * torch_bytes)


def test_node_probe_lists_the_devices_torch_sees() -> None:
    seen = _torch_devices()
    devices = probe.gpu_devices()
    assert sorted(d["index"] for d in devices) == list(range(len(seen)))
    devices.sort(key=lambda d: (d["model"], d["memoryBytes"]))
    for device, (name, total) in zip(devices, seen, strict=True):
        assert device["model"] == name
        assert _close(int(device["memoryBytes"]), total), (device, total)


def test_server_local_node_has_the_devices_torch_sees() -> None:
    seen = _torch_devices()
    node = inventory.local_node("here")
    assert not node.message  # no simulated stand-ins
    gpus = sorted(node.gpus, key=lambda g: (g["model"], g["memoryBytes"]))
    for gpu, (name, total) in zip(gpus, seen, strict=True):
        assert gpu["model"] == name and not gpu.get("simulated")
        assert _close(int(gpu["memoryBytes"]), total), (gpu, total)


def test_doctor_facts_name_every_device(tmp_path: Path) -> None:
    """The facts doctor gathers on each host (its probe, run as doctor runs it)."""
    done = subprocess.run(
        [sys.executable, "-c", doctor.PROBE, "facts", str(tmp_path), "127.0.0.1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = json.loads(done.stdout)["gpus"]  # "NAME, MEMORY MiB, DRIVER" per device
    facts = sorted(
        (name.strip(), memory.strip())
        for name, memory, _driver in (line.rsplit(",", 2) for line in lines)
    )
    seen = _torch_devices()
    assert len(facts) == len(seen), lines
    for (smi_name, memory), (name, total) in zip(facts, seen, strict=True):
        assert smi_name == name
        assert memory.endswith(" MiB") and _close(int(memory.split()[0]) * MIB, total), lines
