"""``export kubeflow`` (issue 25, item 6): each framework's workload as Kubeflow's job,
built with Kubeflow's SDK models, golden-tested (``golden/*.yaml``: read them as the
manifests a user applies); pod templates checked by ``kubernetes-validate``; what
cannot map refused naming the flag.  No Kubernetes API server runs here, so nothing
is applied (``kubectl apply -f`` on a real cluster is the user's step).

Regenerate the golden files after a deliberate change with
``RINGLEADER_REGOLD=1 pytest tests/export/test_kubeflow.py`` and read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ringleader.errors import InvalidSpec
from ringleader.spec import WorkloadSpec

GOLDEN = Path(__file__).parent / "golden"
FRAMEWORKS = ("PyTorch", "TF", "XGBoost", "JAX", "MPI")


def _spec(framework: str, **extra: Any) -> WorkloadSpec:
    """A workload with every field the export maps: a portion of a GPU, CPU and memory
    asked and capped, an environment, a working directory, its policies."""
    pod = {
        "numWorkers": 2, "distributedFramework": framework,
        "command": "python train.py", "args": "--epochs 3",
        "image": "registry.example/team/train:1", "imagePullPolicy": "IfNotPresent",
        "environmentVariables": [{"name": "LR", "value": "0.01"}], "workingDir": "/work",
        "compute": {"cpuCoreRequest": 0.5, "cpuCoreLimit": 2, "cpuMemoryRequest": "1G",
                    "cpuMemoryLimit": "4G", "gpuDevicesRequest": 1,
                    "gpuRequestType": "portion", "gpuPortionRequest": 0.5},
        "backoffLimit": 3, "cleanPodPolicy": "All", "ttlAfterFinishS": 600,
        **({"slotsPerWorker": 2} if framework == "MPI" else {}), **extra,
    }  # fmt: skip
    return WorkloadSpec.model_validate({"name": "train", "projectId": "p", "spec": pod})


def _golden(name: str, manifest: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.yaml"
    text = yaml.safe_dump(manifest, sort_keys=False)
    if os.environ.get("RINGLEADER_REGOLD"):
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs:\n{text}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_framework_becomes_its_kubeflow_job(framework: str) -> None:
    from ringleader.export.kubeflow import export

    done = export(_spec(framework), namespace="team-a")
    _golden(framework.lower(), done.manifest)
    assert done.notes == ["Kubernetes has no GPU fractions: each pod's 0.5 GPU becomes 1"]


@pytest.mark.parametrize("framework", ("PyTorch", "XGBoost", "JAX"))
def test_trainer_v2_writes_a_trainjob_on_the_frameworks_runtime(framework: str) -> None:
    from ringleader.export.kubeflow import export_trainjob

    done = export_trainjob(_spec(framework), namespace="team-a")
    _golden(f"trainjob-{framework.lower()}", done.manifest)
    assert "TrainJob's trainer has no working directory: the image's is used" in done.notes


@pytest.mark.parametrize("framework", ("TF", "MPI"))
def test_a_framework_trainer_has_no_runtime_for_needs_one_named(framework: str) -> None:
    from ringleader.export.kubeflow import export_trainjob

    with pytest.raises(InvalidSpec) as refused:
        export_trainjob(_spec(framework), namespace="n")
    assert refused.value.where == "--runtime" and "no built-in runtime" in refused.value.problem
    named = export_trainjob(_spec(framework), namespace="n", runtime="my-runtime").manifest
    assert named["spec"]["runtimeRef"]["name"] == "my-runtime"


def test_a_workload_without_an_image_needs_one_given() -> None:
    from ringleader.export.kubeflow import export

    with pytest.raises(InvalidSpec) as refused:
        export(_spec("PyTorch", image=None), namespace="n")
    assert refused.value.where == "--image"
    given = export(_spec("PyTorch", image=None), namespace="n", image="mine:1").manifest
    master = given["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert master["containers"][0]["image"] == "mine:1"


def test_a_pod_kubernetes_would_refuse_is_refused_here_naming_where() -> None:
    """kubernetes-validate (strict, Kubernetes 1.37's schemas) is what checks them: a
    container without a name is not a pod."""
    from kubernetes import client as k8s

    from ringleader.export.kubeflow import _checked

    lax = k8s.Configuration()
    lax.client_side_validation = False  # the client's own check would stop it first
    container = k8s.V1Container(image="i", local_vars_configuration=lax)
    nameless = k8s.V1PodTemplateSpec(spec=k8s.V1PodSpec(containers=[container]))
    with pytest.raises(InvalidSpec) as refused:
        _checked({"Worker": nameless}, k8s.ApiClient())
    assert "the Worker pod is not a valid Kubernetes pod" in refused.value.problem
    assert "name" in refused.value.problem, refused.value.problem
