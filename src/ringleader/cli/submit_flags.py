"""The flags of the submit commands: one table, Run:ai's names, help that reads at 80 columns.

``OPTIONS`` maps an option's name (a ``SubmitOptions`` field) to its Typer
parameter; each command picks the ones it takes (``@submit_options`` in
``cli/submit_options.py``), in the groups below.
"""

from __future__ import annotations

from typing import Any

import typer

FLAG = ""  # the metavar of an on/off flag: Typer would show ``<bool>``


def _opt(kind: Any, flags: str, metavar: str, help: str, default: Any = None) -> tuple[Any, Any]:
    """An ``OPTIONS`` entry: ``flags`` is "-g/--gpu"; no default shown (help says it)."""
    parameter = typer.Option(
        default, *flags.split("/"), metavar=metavar, help=help, show_default=False
    )
    return kind, parameter


# name -> (annotation, its Typer parameter).  A command takes a subset, in its own order.
# Help lines stay short: the help table must read at 80 columns.
OPTIONS: dict[str, tuple[Any, Any]] = {
    "name": (
        str,
        typer.Argument(
            None,
            metavar="NAME",
            help="Workload name: lowercase letters, digits, '-'. Or --name-prefix.",
            show_default=False,
        ),
    ),
    "framework": _opt(
        str, "--framework", "NAME", "PyTorch (default), MPI, TF, JAX or XGBoost.", "PyTorch"
    ),
    "workers": _opt(int, "--workers", "N", "Worker pods.", ...),
    "slots_per_worker": _opt(int, "--slots-per-worker", "N", "MPI ranks per pod (default 1)."),
    # the command (see the module's docstring)
    "command": _opt(
        list[str],
        "--command",
        "[CMD]",
        "--command -- CMD ARGS: CMD replaces the image's command. "
        "Older form: --command CMD --args A --args B.",
        [],
    ),
    "args": _opt(list[str], "--args", "ARG", "One argument of --command (repeatable).", []),
    # Run:ai v1 compute flags
    "gpu": _opt(float, "-g/--gpu", "GPUS", "GPUs per pod: 1, 2.. devices; 0.5 a portion; 0 none."),
    "gpu_memory": _opt(str, "--gpu-memory", "SIZE", "GPU memory per pod, e.g. 4G."),
    "cpu": _opt(float, "--cpu", "CORES", "CPU cores per pod."),
    "cpu_limit": _opt(float, "--cpu-limit", "CORES", "CPU cores a pod may use at most."),
    "memory": _opt(str, "--memory", "SIZE", "CPU memory per pod, e.g. 1G."),
    "memory_limit": _opt(str, "--memory-limit", "SIZE", "CPU memory a pod may use at most."),
    # Run:ai v2 compute flags: the API's compute block, one flag per field
    "gpu_devices_request": _opt(int, "--gpu-devices-request", "N", "GPU devices per pod."),
    "gpu_request_type": _opt(
        str, "--gpu-request-type", "TYPE", "portion or memory: how a part of a device is asked."
    ),
    "gpu_portion_request": _opt(
        float, "--gpu-portion-request", "FRACTION", "Part of each device, 0-1."
    ),
    "gpu_portion_limit": _opt(float, "--gpu-portion-limit", "FRACTION", "At most this part, 0-1."),
    "gpu_memory_request": _opt(str, "--gpu-memory-request", "SIZE", "GPU memory per device."),
    "gpu_memory_limit": _opt(str, "--gpu-memory-limit", "SIZE", "At most this GPU memory."),
    "cpu_core_request": _opt(float, "--cpu-core-request", "CORES", "CPU cores per pod."),
    "cpu_core_limit": _opt(float, "--cpu-core-limit", "CORES", "At most this many CPU cores."),
    "cpu_memory_request": _opt(str, "--cpu-memory-request", "SIZE", "CPU memory per pod, e.g. 1G."),
    "cpu_memory_limit": _opt(str, "--cpu-memory-limit", "SIZE", "At most this CPU memory."),
    # the pod's environment and the gang's policies
    "env": _opt(
        list[str], "-e/--environment", "KEY=VALUE", "A variable of every pod (repeat).", []
    ),
    "working_dir": _opt(str, "--working-dir", "DIR", "Where the command runs (default: here)."),
    "backoff_limit": _opt(int, "--backoff-limit", "N", "Gang restarts before Failed (default 6)."),
    "clean_pod_policy": _opt(
        str, "--clean-pod-policy", "POLICY", "Pods left when it ends: Running (default), All, None."
    ),
    "grad_compression": _opt(
        str, "--grad-compression", "MODE", "none (exact DDP), bf16, fp16 or powersgd[:RANK]."
    ),
    "sync_every": _opt(int, "--sync-every", "H", "Local SGD: average parameters every H steps."),
    "interactive": _opt(
        bool, "--interactive", FLAG, "Pods stay up for bash/exec; priority 'interactive'.", False
    ),
    "image": _opt(str, "-i/--image", "IMAGE", "Container image the pods run in (docs/images.md)."),
    "image_pull_policy": _opt(
        str, "--image-pull-policy", "POLICY", "Always, IfNotPresent (default) or Never."
    ),
    "volume": _opt(
        list[str],
        "-v/--volume",
        "SRC:DST[:ro]",
        "Mount host dir SRC at DST in the image (repeat).",
        [],
    ),
    "host_path": _opt(
        list[str],
        "--host-path",
        "SPEC",
        "Run:ai's -v: path=SRC,mount=DST; read-only unless ,readwrite.",
        [],
    ),
    # scheduling
    "preemptible": _opt(
        bool, "--preemptible", FLAG, "May run over quota and be preempted (reclaimed).", False
    ),
    "preemptibility": _opt(
        str, "--preemptibility", "KIND", "preemptible or non-preemptible (default: by priority)."
    ),
    "priority": _opt(
        str, "--priority", "CLASS", "train 50, build-preemptible 75, build 100, inference 125..."
    ),
    "node_pools": _opt(
        list[str], "--node-pools", "POOLS", "Node pools to run in, in order (or repeat).", []
    ),
    "project": _opt(str, "-p/--project", "NAME", "Project (default: the current one)."),
    "name_prefix": _opt(
        str, "--name-prefix", "[PREFIX]", "Name it PREFIX-xxxxxx; bare: NAME is the prefix."
    ),
    # workload assets, by name (``submit_assets.with_assets``): every submit command takes them
    "environment_asset": _opt(
        str, "--environment-asset", "NAME", "An environment asset: image, command, env, dir."
    ),
    "compute": _opt(str, "--compute", "NAME", "A compute-resource asset: GPUs, CPU, memory."),
}
ASSET_OPTIONS = ("environment_asset", "compute")
COMMAND = ("command", "args")
V1_COMPUTE = ("gpu", "gpu_memory", "cpu", "cpu_limit", "memory", "memory_limit")
V2_COMPUTE = (
    "gpu_devices_request", "gpu_request_type", "gpu_portion_request", "gpu_portion_limit",
    "gpu_memory_request", "gpu_memory_limit", "cpu_core_request", "cpu_core_limit",
    "cpu_memory_request", "cpu_memory_limit",
)  # fmt: skip
POD = (
    "env", "working_dir", "backoff_limit", "clean_pod_policy", "interactive", "image",
    "image_pull_policy", "volume", "host_path", "grad_compression", "sync_every",
)  # fmt: skip
V1_SCHEDULING = ("preemptible", "priority", "node_pools")
V2_SCHEDULING = ("preemptibility", "priority", "node_pools")
# A spec field (snake_case) -> the options that set it; an error names the one typed
# (``SubmitOptions.flag_for``).
FIELD_OPTIONS: dict[str, tuple[str, ...]] = {
    "project_id": ("project",),
    "num_workers": ("workers",),
    "distributed_framework": ("framework",),
    "environment_variables": ("env",),
    "host_path": ("volume", "host_path"),
    "storage": ("volume", "host_path"),
    "compute": ("gpu", "gpu_memory", "gpu_request_type", "gpu_devices_request"),
    "gpu_devices_request": ("gpu", "gpu_memory", "gpu_devices_request"),
    "gpu_portion_request": ("gpu", "gpu_portion_request"),
    "gpu_request_type": ("gpu", "gpu_memory", "gpu_request_type"),
    "gpu_memory_request": ("gpu_memory", "gpu_memory_request"),
    "cpu_core_request": ("cpu", "cpu_core_request"),
    "cpu_core_limit": ("cpu_limit", "cpu_core_limit"),
    "cpu_memory_request": ("memory", "cpu_memory_request"),
    "cpu_memory_limit": ("memory_limit", "cpu_memory_limit"),
    "preemptibility": ("preemptible", "preemptibility"),
    "priority_class": ("priority",),
}
