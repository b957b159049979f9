"""The templates as the sidebar lists them: whether each can work here, and what its resource says (probes).

:class:`TemplateProbes` keeps, for the cluster manager, what each template's backend and resource
answered when last asked: whether the backend can work on this machine (checked in a thread, see
:mod:`.availability`) and what the resource a template names (e.g. a gateway) said: whether it
answers, and the user options it offers, which replace the template's own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from clustermgr_lab.backends import BACKENDS, Backend, TemplateProbe
from clustermgr_lab.backends.base import HelperProcess
from clustermgr_lab.domain.templates import Template
from clustermgr_lab.manager.availability import AVAILABILITY_TTL, PROBE_TIMEOUT, Availability, SubmitCommands


class TemplateProbes:
    """What each template's backend and resource answered when last asked.

    Parameters
    ----------
    templates : dict
        The manager's templates by name (shared: a resource's user options replace a template's there).
    log : logging.Logger
    submit_commands : callable, optional
        Reads the batch backends' submit commands (in the scheduler links' process).
    helper : HelperProcess, optional
        The server's helper process, which resources are asked from (:meth:`Backend.probe`).
    """

    def __init__(
        self,
        templates: dict[str, Template],
        log: logging.Logger,
        submit_commands: SubmitCommands | None = None,
        helper: HelperProcess | None = None,
    ):
        self.templates = templates
        self.helper = helper  # where a resource is asked from (the scheduler links' process)
        self.log = log
        self.availability = Availability(submit_commands)
        self._probes: dict[str, TemplateProbe] = {}  # what each template's resource said when last asked
        self._probed_at = float("-inf")
        self._probing: asyncio.Future | None = None
        self._as_configured = dict(templates)  # before any resource's user options replaced a template's

    def list_templates(self) -> list[dict[str, Any]]:
        """The templates, each with its backend's capabilities and whether it can work here (as last checked)."""
        return [
            {
                **t.to_dict(),
                "capabilities": BACKENDS[t.backend].capabilities.to_dict(),
                "available": self.unavailable_reason(t) is None,
                "unavailable_reason": self.unavailable_reason(t),
            }
            for t in self.templates.values()
        ]

    def unavailable_reason(self, template: Template) -> str | None:
        probe = self._probes.get(template.name)
        return (probe.reason if probe is not None else None) or self.availability.reason(template.backend)

    async def check_backends(self) -> None:
        """Check, in a thread, whether the templates' backends can work here, and probe their resources."""
        await asyncio.gather(
            self.availability.check({BACKENDS[t.backend] for t in self.templates.values()}), self.probe_templates()
        )

    async def probe_templates(self) -> None:
        """Ask each template's resource (:meth:`Backend.probe`), at most every ``AVAILABILITY_TTL`` s; never raises.

        A resource that offers user options (a gateway's ``/api/v1/options``) replaces the template's.
        """
        if self._probing is not None:  # one in flight: its answers, not older ones
            await asyncio.shield(self._probing)
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._probed_at < AVAILABILITY_TTL:
            return
        self._probing = asyncio.ensure_future(self._probe_templates())
        try:
            await asyncio.shield(self._probing)
        finally:
            self._probed_at, self._probing = loop.time(), None

    async def _probe_templates(self) -> None:
        templates = list(self._as_configured.values())

        async def probe(template: Template) -> TemplateProbe | None:
            try:
                return await BACKENDS[template.backend].probe(template.options, PROBE_TIMEOUT, helper=self.helper)
            except Exception as exc:  # a probe must not break the listing of templates
                self.log.warning("template %s: its resource could not be asked: %s", template.name, exc)
                return TemplateProbe(f"its resource could not be asked: {exc}")

        for template, answer in zip(templates, await asyncio.gather(*(probe(t) for t in templates))):
            if answer is None:
                continue
            self._probes[template.name] = answer
            if answer.user_options is not None:
                self.templates[template.name] = replace(template, user_options=answer.user_options)

    def found_sources(self) -> list[tuple[str, type[Backend], dict[str, Any]]]:
        """``(template name, backend class, template options)`` of each template: where clusters may be found."""
        return [(t.name, BACKENDS[t.backend], dict(t.options)) for t in self.templates.values()]
