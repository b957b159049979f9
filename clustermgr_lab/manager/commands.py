"""Requests parsed once, at the edge: a JSON body in, a typed and limit-checked command out.

The manager's methods take these values only; nothing past this module re-reads a body, resolves a
scale target again or re-parses adaptive settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clustermgr_lab.backends import parse_scheduler_address
from clustermgr_lab.backends.base import Capabilities
from clustermgr_lab.common.security import ClusterCredentials
from clustermgr_lab.domain.adaptive import AdaptOff, AdaptSettings, parse_adapt, parse_adapt_change
from clustermgr_lab.domain.errors import Conflict, InvalidRequest
from clustermgr_lab.domain.fields import check_number, reject_unknown_fields
from clustermgr_lab.domain.idle import parse_idle_timeout
from clustermgr_lab.domain.limits import Limits
from clustermgr_lab.domain.options import parse_backend_options, resolve_user_options
from clustermgr_lab.domain.spec import (
    Resolution,
    WorkerGroup,
    WorkerSpec,
    parse_spec,
    parse_target,
    resolve_target,
)
from clustermgr_lab.domain.templates import Template


@dataclass(frozen=True)
class CreateCluster:
    """A new cluster from a template, every value checked against this server's limits."""

    template: Template
    name: str | None
    spec: WorkerSpec
    adapt: AdaptSettings | None
    idle_timeout: float | None
    user_options: dict[str, Any]
    backend_options: dict[str, Any]


@dataclass(frozen=True)
class AttachCluster:
    """A cluster started elsewhere, to be listed here: its scheduler's address ``tcp://host:port``.

    Or ``tls://host:port`` with ``tls``: the certificate files a Client of it presents.
    """

    address: str
    name: str | None
    tls: ClusterCredentials | None = None


@dataclass(frozen=True)
class Scale:
    resolution: Resolution


@dataclass(frozen=True)
class ReplaceSpec:
    spec: WorkerSpec


@dataclass(frozen=True)
class ChangeAdapt:
    change: AdaptSettings | AdaptOff | None


@dataclass(frozen=True)
class SetIdleTimeout:
    seconds: float | None


@dataclass(frozen=True)
class Rename:
    name: str


Change = Scale | ReplaceSpec | ChangeAdapt | SetIdleTimeout | Rename
CREATE_FIELDS = ("template", "name", "spec", "adapt", "idle_timeout", "options")
ATTACH_FIELDS = ("attach", "name", "tls")
CHANGE_FIELDS = ("scale", "spec", "adapt", "idle_timeout", "name")


def parse_attach_tls(value: Any, address: str) -> ClusterCredentials | None:
    """The certificate files of an attach request: required for a ``tls://`` address, refused for ``tcp://``.

    Each must be a readable file of the server's user (checked now, so a typo is a 400, not a failed cluster).
    """
    if not address.startswith("tls://"):
        if value is not None:
            raise InvalidRequest("only a tls:// scheduler address takes certificate files", "tls")
        return None
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            "a tls:// scheduler needs the files its Client presents: {ca_file, cert, key} (absolute paths)", "tls"
        )
    reject_unknown_fields(value, ("ca_file", "cert", "key"), "tls")
    for key in ("ca_file", "cert", "key"):
        path = value.get(key)
        if not isinstance(path, str) or not os.path.isabs(path) or not os.access(path, os.R_OK):
            raise InvalidRequest(
                f"must be the absolute path of a file this server can read, not {path!r}", f"tls.{key}"
            )
        if not os.path.isfile(path):  # a FIFO or a device (opening it would block), or a folder
            raise InvalidRequest(f"must be a regular file, not a FIFO, device or folder: {path!r}", f"tls.{key}")
    return ClusterCredentials.from_paths(value)


def require_object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidRequest(f"the request body must be a JSON object, not {type(body).__name__}", None)
    return body


def parse_name(value: Any) -> str:
    """A cluster's name: printable, 1-80 characters, stripped."""
    if not isinstance(value, str) or not value.strip() or len(value) > 80:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else f"{len(value)} characters"
        raise InvalidRequest(f"must be a non-empty string of at most 80 characters, not {shown}", "name")
    # str.isprintable refuses control and format characters (bidi overrides), line breaks and lone surrogates.
    unprintable = next((c for c in value if not c.isprintable()), None)
    if unprintable is not None:
        raise InvalidRequest(
            "must be printable: no control characters, line breaks, lone surrogates or other unprintable "
            f"characters (found U+{ord(unprintable):04X})",
            "name",
        )
    return value.strip()


def check_spec_allowed(spec: WorkerSpec, capabilities: Capabilities, fixed: WorkerSpec | None) -> None:
    """A Worker Spec its backend can run: one group where it takes only one; the template's shape where it is fixed.

    Parameters
    ----------
    fixed : WorkerSpec, optional
        The template's spec, whose one group's shape (all but its count) a non-editable spec must keep.
    """
    reasons = capabilities.reasons
    if not capabilities.multiple_groups and len(spec.groups) > 1:
        why = reasons.get("multiple_groups", "its backend runs one group only")
        raise InvalidRequest(f"has {len(spec.groups)} groups, but this cluster takes one: {why}", "spec.groups")
    if not capabilities.editable_spec and fixed is not None:
        mine, theirs = spec.groups[0].to_dict(), fixed.groups[0].to_dict()
        for key, value in theirs.items():
            if key != "count" and mine.get(key) != value:
                why = reasons.get("editable_spec", "its backend sets the shape of its workers")
                raise InvalidRequest(
                    f"must stay {value!r} (the template's), not {mine.get(key)!r}: {why}", f"spec.groups[0].{key}"
                )


def parse_days(value: Any, maximum: int) -> int:
    """The ``days`` of the usage summary (a query argument, so a string of digits, or a number): 1 to ``maximum``."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    message = f"must be a whole number of days from 1 to {maximum}, not {value!r}"
    return check_number(value, "days", message, integer=True, minimum=1, maximum=maximum)


def check_adapt_limits(spec: WorkerSpec, settings: AdaptSettings, limits: Limits) -> None:
    """Adaptive mode may grow every adaptive group to its maximum: that plan must be within the caps too."""
    largest = spec
    for adapt_range in settings.ranges:
        largest = largest.with_count(adapt_range.group, adapt_range.worker_bounds(spec.group(adapt_range.group))[1])
    limits.check(largest, "adapt.maximum")


class RequestParser:
    """Parses and checks request bodies against this server's templates and limits.

    Parameters
    ----------
    templates : mapping
        The templates by name.
    default_template : str
        Used when a request names none.
    template_options : callable
        The options a backend (by name) declares.
    limits_for : callable
        The caps for clusters of given capabilities.
    max_workers, max_groups : int
        The per-cluster worker and group limits.
    """

    def __init__(
        self,
        templates: Mapping[str, Template],
        default_template: str,
        template_options: Callable[[str], Mapping[str, Any]],
        capabilities: Callable[[str], Capabilities],
        limits_for: Callable[[Capabilities], Limits],
        max_workers: int,
        max_groups: int,
        user_options_option: Callable[[str], str | None] = lambda backend: None,
        worker_shape: Callable[[str], Callable[[WorkerGroup, Mapping[str, Any]], WorkerGroup]] = (
            lambda backend: lambda group, values: group
        ),
    ):
        self.templates = templates
        self.user_options_option = user_options_option
        self.worker_shape = worker_shape
        self.default_template = default_template
        self.template_options = template_options
        self.capabilities = capabilities
        self.limits_for = limits_for
        self.max_workers = max_workers
        self.max_groups = max_groups

    def create(self, body: Any) -> CreateCluster | AttachCluster:
        """``POST clusters``: a new cluster, or ``{"attach": address}`` for one started elsewhere."""
        body = require_object(body)
        if "attach" in body:
            reject_unknown_fields(body, ATTACH_FIELDS)
            name = parse_name(body["name"]) if body.get("name") is not None else None
            address = parse_scheduler_address(body["attach"], schemes=("tcp", "tls"))
            return AttachCluster(address, name, parse_attach_tls(body.get("tls"), address))
        reject_unknown_fields(body, CREATE_FIELDS)
        template_name = body.get("template", self.default_template)
        if template_name is None:
            template_name = self.default_template
        if not isinstance(template_name, str) or template_name not in self.templates:
            raise InvalidRequest(
                f"unknown template {template_name!r}; templates are: {', '.join(self.templates)}", "template"
            )
        template = self.templates[template_name]
        spec = template.spec
        limits = self.limits_for(self.capabilities(template.backend))
        if body.get("spec") is not None:
            spec = self.spec(body["spec"], limits)
            check_spec_allowed(spec, self.capabilities(template.backend), template.spec)
        elif spec.total_workers > self.max_workers:
            raise InvalidRequest(f"template asks for more than {self.max_workers} workers", "template")
        else:
            limits.check(spec, "template")
        idle_timeout = parse_idle_timeout(body["idle_timeout"]) if "idle_timeout" in body else template.idle_timeout
        declared = self.template_options(template.backend)
        into = self.user_options_option(template.backend)
        if into is not None:  # options the backend learnt from its resource (a gateway's): handed over as one mapping
            user_values = resolve_user_options(body.get("options"), template.user_options, None)
            backend_options = {**template.options, into: {**template.options.get(into, {}), **user_values}}
        else:
            user_values = resolve_user_options(body.get("options"), template.user_options, declared)
            backend_options = {**template.options, **parse_backend_options(user_values, declared, "options")}
        # a backend whose workers' size is an option (a gateway's worker_cores): its groups have that size
        spec = WorkerSpec(tuple(self.worker_shape(template.backend)(g, user_values) for g in spec.groups))
        adapt_data = body.get("adapt", template.adapt)
        adapt = parse_adapt(adapt_data, spec, max_workers=self.max_workers) if adapt_data is not None else None
        if adapt is not None:
            check_adapt_limits(spec, adapt, limits)
        name = parse_name(body["name"]) if body.get("name") is not None else None
        return CreateCluster(template, name, spec, adapt, idle_timeout, user_values, backend_options)

    def spec(self, value: Any, limits: Limits) -> WorkerSpec:
        spec = parse_spec(value, max_workers=self.max_workers, max_groups=self.max_groups)
        limits.check(spec, "spec.groups", groups_field="spec.groups")
        return spec

    def change(
        self,
        body: Any,
        *,
        name: str,
        spec: WorkerSpec,
        adapt: AdaptSettings | None,
        backend: str,
        capabilities: Capabilities,
    ) -> Change:
        """``PATCH clusters/{id}``: exactly one change, parsed against the cluster's current spec and adaptive settings."""
        body = require_object(body)
        reject_unknown_fields(body, CHANGE_FIELDS)
        if len(body) != 1:
            raise InvalidRequest("give exactly one of 'scale', 'spec', 'adapt', 'idle_timeout' or 'name'", None)
        ((key, value),) = body.items()
        if key != "name" and not capabilities.can_scale:
            raise Conflict(
                f"cannot change the {key} of cluster {name!r}: it was started elsewhere and is only "
                f"attached here ({backend} backend); its workers are started and stopped where it was started",
                key,
            )
        limits = self.limits_for(capabilities)
        if key == "scale":
            target = parse_target(value)
            resolution = resolve_target(spec, target, max_workers=self.max_workers)
            limits.check(spec.with_count(resolution.group, resolution.workers), f"scale.{target.unit}")
            return Scale(resolution)
        if key == "spec":
            if not capabilities.editable_spec:
                why = capabilities.reasons.get("editable_spec", "its backend sets the shape of its workers")
                raise Conflict(f"cannot edit the Worker Spec of cluster {name!r}: {why}; scale it instead", key)
            spec_value = self.spec(value, limits)
            check_spec_allowed(spec_value, capabilities, None)
            return ReplaceSpec(spec_value)
        if key == "adapt":
            change = parse_adapt_change(value, spec, adapt, max_workers=self.max_workers)
            if isinstance(change, AdaptSettings):
                check_adapt_limits(spec, change, limits)
            return ChangeAdapt(change)
        if key == "idle_timeout":
            return SetIdleTimeout(parse_idle_timeout(value))
        return Rename(parse_name(value))
