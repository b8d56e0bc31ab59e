"""The client's calls on the organisation: projects, nodes, users, members, access keys.

A mixin of ``Client``, kept apart so the SDK's module stays short (under the house's
~400 lines): the administration calls are plain requests, one per endpoint, with no
retry or token logic of their own; each goes through the client's ``request``
(``_get``/``_get_list`` to read an answer as its model), so a token renewed, a
standby skipped or an error status turned into its typed error happens there, once.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ringleader.client_assets import request_json
from ringleader.server.schemas import (
    AccessKeyCreated,
    AccessKeyIn,
    AccessKeyList,
    AccessKeyOut,
    MemberIn,
    MemberOut,
    NodeIn,
    NodeOut,
    NodePoolResources,
    ProjectIn,
    ProjectOut,
    UserCreated,
    UserIn,
    UserOut,
    UserUpdate,
)

M = TypeVar("M", bound=BaseModel)


class OrgCalls:
    """Projects and their members, nodes, users and access keys: list, get, create, change,
    delete (most are for admins; the server decides who may)."""

    # ``Client``'s own, declared here so these calls type-check on their own.
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _get(self, model: type[M], path: str, **kwargs: Any) -> M:
        raise NotImplementedError

    def _get_list(self, model: type[M], path: str, wrapped_in: str | None = None) -> list[M]:
        raise NotImplementedError

    # ----- projects and nodes ----------------------------------------------
    def projects(self) -> list[ProjectOut]:
        return self._get_list(ProjectOut, "/api/v1/org-unit/projects", "projects")

    def get_project(self, key: str) -> ProjectOut:
        return self._get(ProjectOut, f"/api/v1/org-unit/projects/{key}")

    def create_project(self, project: ProjectIn) -> ProjectOut:
        response = self.request("POST", "/api/v1/org-unit/projects", json=request_json(project))
        return ProjectOut.model_validate(response.json())

    def update_project(self, key: str, resources: list[NodePoolResources]) -> ProjectOut:
        body = {"resources": [request_json(r) for r in resources]}
        response = self.request("PUT", f"/api/v1/org-unit/projects/{key}", json=body)
        return ProjectOut.model_validate(response.json())

    def delete_project(self, key: str) -> None:
        self.request("DELETE", f"/api/v1/org-unit/projects/{key}")

    def nodes(self) -> list[NodeOut]:
        return self._get_list(NodeOut, "/api/v1/nodes")

    def add_node(self, node: NodeIn) -> NodeOut:
        """Register an SSH host; the server probes it first (up to ~30 s)."""
        response = self.request("POST", "/api/v1/nodes", json=request_json(node), timeout=60.0)
        return NodeOut.model_validate(response.json())

    def remove_node(self, name: str) -> None:
        self.request("DELETE", f"/api/v1/nodes/{name}")

    # ----- users, members, access keys ---------------------------------------
    def users(self) -> list[UserOut]:
        return self._get_list(UserOut, "/api/v1/users")

    def user(self, key: str) -> UserOut:
        """A user by id or username (global admins; anyone for themselves)."""
        return self._get(UserOut, f"/api/v1/users/{key}")

    def create_user(self, user: UserIn) -> UserCreated:
        """A new user with its first access key; the secret is in this answer only."""
        response = self.request("POST", "/api/v1/users", json=request_json(user))
        return UserCreated.model_validate(response.json())

    def update_user(self, key: str, change: UserUpdate) -> UserOut:
        response = self.request("PUT", f"/api/v1/users/{key}", json=request_json(change))
        return UserOut.model_validate(response.json())

    def delete_user(self, key: str) -> None:
        self.request("DELETE", f"/api/v1/users/{key}")

    def logout_user(self, key: str) -> None:
        """End every token of the user; its access keys stay."""
        self.request("POST", f"/api/v1/users/{key}/logout")

    def members(self, project: str) -> list[MemberOut]:
        return self._get_list(MemberOut, f"/api/v1/org-unit/projects/{project}/members")

    def set_member(self, project: str, user: str, role: str) -> MemberOut:
        """Add ``user`` to ``project`` with ``role`` (admin, researcher, viewer), or change it."""
        body = request_json(MemberIn.model_validate({"role": role}))
        path = f"/api/v1/org-unit/projects/{project}/members/{user}"
        return MemberOut.model_validate(self.request("PUT", path, json=body).json())

    def remove_member(self, project: str, user: str) -> None:
        self.request("DELETE", f"/api/v1/org-unit/projects/{project}/members/{user}")

    def access_keys(self) -> list[AccessKeyOut]:
        return self._get(AccessKeyList, "/api/v1/access-keys").access_keys

    def create_access_key(self, name: str) -> AccessKeyCreated:
        """A new key of this user's; the secret is in this answer only."""
        body = request_json(AccessKeyIn(name=name))
        response = self.request("POST", "/api/v1/access-keys", json=body)
        return AccessKeyCreated.model_validate(response.json())

    def revoke_access_key(self, key_id: str) -> None:
        """Revoke a key (by id or client id): its tokens end now."""
        self.request("DELETE", f"/api/v1/access-keys/{key_id}")
