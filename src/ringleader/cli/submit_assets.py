"""``--environment-asset`` and ``--compute``: the named assets' values filled into a spec.

Apart from ``cli/submit_options.py`` because it is the one step of a submission that asks
the server (the assets are looked up through the client), and it runs after the options
have become a valid ``WorkloadSpec``: the user's own flags win over an asset's values, and
the result is validated again, an error naming the flag that chose the asset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ringleader.cli.submit_options import SubmitOptions
from ringleader.errors import InvalidSpec
from ringleader.spec import WorkloadSpec


def with_assets(spec: WorkloadSpec, options: SubmitOptions, client: Any) -> WorkloadSpec:
    """``spec`` with the values of the assets ``--environment-asset`` and ``--compute``
    name, looked up in the spec's project (its own asset before everyone's), where the
    user's own flags gave none: flags win. An unknown name is an error naming the flag.
    ``client``: a ``ringleader.client.Client``."""
    if not (options.environment_asset or options.compute):
        return spec
    pod = spec.spec.model_dump(exclude_unset=True)
    project = spec.project_id
    if options.environment_asset:
        environment = _asset(
            client.find_environment, "environment", options.environment_asset, project,
            options.flag("environment_asset"),
        )  # fmt: skip
        pod = environment.spec.fill(pod, working_dir_given=options.working_dir is not None)
    if options.compute:
        resource = _asset(
            client.find_compute_resource, "compute resource", options.compute, project,
            options.flag("compute"),
        )  # fmt: skip
        pod["compute"] = resource.spec.fill(pod.get("compute") or {})
    body = {**spec.model_dump(exclude_unset=True), "spec": pod}
    try:
        return WorkloadSpec.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = error["msg"].removeprefix("Value error, ")
        flag = options.flag_for(error["loc"])
        raise InvalidSpec(f"{message} (with the assets' values)", flag) from None


def _asset(find: Callable[[str, str], Any], title: str, name: str, project: str, flag: str) -> Any:
    """The asset ``find`` returns; InvalidSpec naming ``flag`` when none has that name (a
    missing project stays NotFound, as the submission itself would report it)."""
    from ringleader.errors import NotFound

    try:
        return find(name, project)
    except NotFound as exc:
        if getattr(exc, "kind", None) != title:  # the project itself, as a submit would say
            raise
        command = "environment" if title == "environment" else "compute"
        raise InvalidSpec(
            f"no {title} named {name!r} in project {project!r} nor for every project "
            f"(see `ringleader {command} list -p {project}`)",
            flag,
        ) from None
