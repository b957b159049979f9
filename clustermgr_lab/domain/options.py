"""Template options: what a site sets per template for its backend, and what a user may set at creation.

Pure domain logic: no tornado, no I/O. A backend declares the options it understands as
:class:`BackendOption` values (``Backend.template_options``); a template gives them in
``options`` and may let the user set some of them through ``user_options`` (type, default,
choices, min/max). Both are checked when the server starts; user values again at creation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.fields import is_number, reject_unknown_fields
from clustermgr_lab.domain.spec import parse_size

Parser = Callable[[Any, str], Any]

SINGLE_LINE = re.compile(r"[^\r\n\x00]+")
# No leading "-": a value is never read as a flag of its own by the batch system's parser.
WORD = re.compile(r"[A-Za-z0-9_.+%@=:/][A-Za-z0-9_.+%@=:/-]*")
# Grid Engine's -l list: name[=value], comma-separated, no spaces (a space would start another flag: -q, -P).
RESOURCE = r"[A-Za-z_][A-Za-z0-9_.]*(=[A-Za-z0-9_.:*|!@/+%][A-Za-z0-9_.:*|!@/+%-]*)?"
RESOURCE_LIST = re.compile(rf"{RESOURCE}(,{RESOURCE})*")
# SLURM/PBS/SGE/LSF time limits: minutes, [HH:]MM:SS, D-HH[:MM[:SS]]
WALLTIME = re.compile(r"\d+|\d+:\d{2}(:\d{2})?|\d+-\d{1,2}(:\d{2}){0,2}")
HOST = re.compile(r"[A-Za-z0-9_.:][A-Za-z0-9_.:-]*|\[[0-9A-Fa-f:]+\]")
USER_OPTION_TYPES = {"string", "integer", "number", "boolean"}


def _where(field_name: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, field_name)


def matching(pattern: re.Pattern, described: str) -> Parser:
    """A parser of strings that ``pattern`` matches in full, refusing others as not ``described``."""

    def parse(value: Any, field_name: str) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise _where(field_name, f"must be {described}, not {value!r}")
        return value

    return parse


#: One line of text: nothing that could split a job script or a command line.
text = matching(SINGLE_LINE, "a non-empty single line of text")
#: A name such as a partition, account, QOS or interface: no spaces, no shell characters.
word = matching(WORD, "one word of letters, digits and _.+%@=:/- that does not start with -")
#: Grid Engine resources (``-l``): ``name=value`` pairs separated by commas, nothing that could be another flag.
resource_list = matching(
    RESOURCE_LIST, "resources as name=value pairs separated by commas, without spaces, e.g. 'h_vmem=4G,mem_req=4G'"
)
#: A batch time limit such as ``04:00:00``, ``30`` (minutes) or ``1-12:00:00``.
walltime = matching(WALLTIME, "a time limit such as '04:00:00', '30' or '1-12:00:00'")
#: A host name or IP address the compute nodes reach.
host = matching(HOST, "a host name or IP address")


def memory(value: Any, field_name: str) -> str:
    """A size such as ``2 GiB`` (``dask.utils.parse_bytes``): checked now, not when a job script is written.

    >>> memory("2 GiB", "options.scheduler_memory")
    '2 GiB'
    """
    value = text(value, field_name)
    parse_size(value, field_name)
    return value


def absolute_path(value: Any, field_name: str) -> str:
    """An absolute path, as the compute nodes see it."""
    value = text(value, field_name)
    if not value.startswith("/"):
        raise _where(field_name, f"must be an absolute path, not {value!r}")
    return value


def lines(value: Any, field_name: str) -> tuple[str, ...]:
    """A list of single lines (a single string counts as one line)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise _where(field_name, f"must be a list of lines, not {value!r}")
    return tuple(text(line, f"{field_name}[{i}]") for i, line in enumerate(value))


def integer(value: Any, field_name: str) -> int:
    """A whole number."""
    if not _whole(value):
        raise _where(field_name, f"must be a whole number, not {value!r}")
    return int(value)


def _whole(value: Any) -> bool:
    """A number with no fraction: ``3`` or ``3.0``, not ``3.5`` nor ``True``."""
    return is_number(value) and float(value).is_integer()


def boolean(value: Any, field_name: str) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise _where(field_name, f"must be true or false, not {value!r}")
    return value


DASK_KEY = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+")


def dask_config(value: Any, field_name: str) -> dict[str, str | int | float | bool]:
    """dask configuration as dotted keys and plain values, e.g. ``{"distributed.admin.tick.interval": "1s"}``.

    >>> dask_config({"distributed.worker.profile.enabled": False}, "options.worker_config")
    {'distributed.worker.profile.enabled': False}
    """
    if not isinstance(value, Mapping):
        raise _where(field_name, f"must be an object of dotted dask keys -> values, not {value!r}")
    parsed = {}
    for key, item in value.items():
        if not isinstance(key, str) or not DASK_KEY.fullmatch(key):
            raise _where(f"{field_name}.{key}", "must be a dotted dask key such as 'distributed.admin.tick.interval'")
        if isinstance(item, str):
            item = text(item, f"{field_name}.{key}")
        elif not (isinstance(item, bool) or is_number(item)):
            raise _where(f"{field_name}.{key}", f"must be a string, number or true/false, not {item!r}")
        parsed[key] = item
    return parsed


def dask_config_environment(config: Mapping[str, Any]) -> dict[str, str]:
    """The ``DASK_*`` variables that set ``config`` in a new process (dask reads them at import).

    >>> dask_config_environment({"distributed.admin.tick.interval": "1s", "distributed.worker.profile.enabled": False})
    {'DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL': '1s', 'DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED': 'False'}
    """
    return {"DASK_" + key.upper().replace("-", "_").replace(".", "__"): str(item) for key, item in config.items()}


def gpu_directive(value: Any, field_name: str) -> str | None:
    """A directive with ``{gpus}`` in it (e.g. ``--gres=gpu:{gpus}``), or null when the site has no GPU directive."""
    if value is None:
        return None
    value = text(value, field_name)
    if "{gpus}" not in value:
        raise _where(field_name, f"must contain '{{gpus}}' (the GPUs per worker), not {value!r}")
    try:
        value.format(gpus=1)
    except (KeyError, IndexError, ValueError):
        raise _where(field_name, f"may use only '{{gpus}}' as a placeholder, not {value!r}") from None
    return value


@dataclass(frozen=True)
class BackendOption:
    """One option a backend understands: its parser and what it does."""

    parse: Parser
    help: str
    kind: str = "string"  # for user options: the user-facing type this option takes
    #: Its value is used as it is: directives (any flag of the batch system), shell lines, a class to import. A
    #: template may offer it as a user option only with ``choices`` (a free value would add any flag, command
    #: or module).
    free_form: bool = False


@dataclass(frozen=True)
class UserOption:
    """An option the user may set in "New Cluster": a backend option with a type, default and bounds."""

    name: str
    type: str
    default: Any
    label: str = ""
    description: str = ""
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "label": self.label or self.name,
            "description": self.description,
            "choices": list(self.choices) if self.choices is not None else None,
            "minimum": self.minimum,
            "maximum": self.maximum,
        }

    def check(self, value: Any, field_name: str) -> Any:
        """``value`` if it has this option's type and lies within its choices and bounds."""
        if self.type == "boolean":
            ok = isinstance(value, bool)
        elif self.type == "integer":
            ok = _whole(value)
            value = int(value) if ok else value
        elif self.type == "number":
            ok = is_number(value)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise _where(field_name, f"must be of type {self.type}, not {value!r}")
        if self.choices is not None and value not in self.choices:
            raise _where(field_name, f"must be one of {', '.join(map(repr, self.choices))}, not {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise _where(field_name, f"must be at least {self.minimum:g}, not {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise _where(field_name, f"must be at most {self.maximum:g}, not {value!r}")
        return value


def parse_backend_options(data: Any, declared: Mapping[str, BackendOption], field_name: str) -> dict[str, Any]:
    """Validate a template's ``options`` against what its backend declares."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise _where(field_name, f"must be an object, not {type(data).__name__}")
    parsed = {}
    for key, value in data.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise _where(f"{field_name}.{key}", f"unknown option {key!r} for this backend; it takes: {known}")
        parsed[key] = declared[key].parse(value, f"{field_name}.{key}")
    return parsed


def _bound(value: Any, field_name: str) -> float | None:
    if value is None:
        return None
    if not is_number(value):
        raise _where(field_name, f"must be a number, not {value!r}")
    return value


def parse_user_options(
    data: Any, declared: Mapping[str, BackendOption], site: Mapping[str, Any], field_name: str
) -> tuple[UserOption, ...]:
    """Validate a template's ``user_options``: each names a backend option and gives its type, default and bounds.

    Without a ``default``, the template's own ``options`` value is the default.
    """
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise _where(field_name, f"must be an object of option name -> settings, not {type(data).__name__}")
    allowed = {"type", "default", "label", "description", "choices", "minimum", "maximum"}
    options = []
    for name, settings in data.items():
        where = f"{field_name}.{name}"
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise _where(where, f"{name!r} is not an option of this backend; it takes: {known}")
        if not isinstance(settings, Mapping):
            raise _where(where, f"must be an object, not {type(settings).__name__}")
        reject_unknown_fields(settings, allowed, where)
        kind = settings.get("type", declared[name].kind)
        if kind not in USER_OPTION_TYPES:
            raise _where(f"{where}.type", f"must be one of {', '.join(sorted(USER_OPTION_TYPES))}, not {kind!r}")
        choices = settings.get("choices")
        if choices is not None and (not isinstance(choices, list) or not choices):
            raise _where(f"{where}.choices", f"must be a non-empty list, not {choices!r}")
        if "default" not in settings and name not in site:
            raise _where(f"{where}.default", "is required (the template's options do not set this option)")
        option = UserOption(
            name=name,
            type=kind,
            default=settings.get("default", site.get(name)),
            label=text(settings.get("label", name), f"{where}.label"),
            description=str(settings.get("description", "")),
            choices=tuple(choices) if choices is not None else None,
            minimum=_bound(settings.get("minimum"), f"{where}.minimum"),
            maximum=_bound(settings.get("maximum"), f"{where}.maximum"),
        )
        if declared[name].free_form and option.choices is None:
            raise _where(
                f"{where}.choices",
                f"is required: {name!r} is used as it is (directives, shell lines, a class to import), so a "
                "user may only pick among values the site chose",
            )
        if kind not in ("integer", "number") and (option.minimum is not None or option.maximum is not None):
            raise _where(where, f"minimum and maximum apply only to integer and number options, not to {kind}")
        for i, choice in enumerate(option.choices or ()):
            option.check(choice, f"{where}.choices[{i}]")
            declared[name].parse(choice, f"{where}.choices[{i}]")
        option.check(option.default, f"{where}.default")
        declared[name].parse(option.default, f"{where}.default")
        options.append(option)
    return tuple(options)


def resolve_user_options(
    data: Any,
    user_options: tuple[UserOption, ...],
    declared: Mapping[str, BackendOption] | None,
    field_name: str = "options",
) -> dict[str, Any]:
    """The values of a template's user options for one new cluster: defaults, overridden by ``data``.

    Each value is also checked by the backend option it sets (``declared``; None: the options were learnt
    from the backend's resource, and their own types, choices and bounds are the check); the values are
    returned as given.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise _where(field_name, f"must be an object, not {type(data).__name__}")
    by_name = {o.name: o for o in user_options}
    for key in data:
        if key not in by_name:
            known = ", ".join(by_name) or "none"
            raise _where(f"{field_name}.{key}", f"this template does not let you set {key!r}; it takes: {known}")
    values = {}
    for option in user_options:
        where = f"{field_name}.{option.name}"
        value = option.check(data.get(option.name, option.default), where)
        if declared is not None:
            declared[option.name].parse(value, where)
        values[option.name] = value
    return values
