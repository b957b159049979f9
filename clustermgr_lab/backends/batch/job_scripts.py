"""What a batch backend writes into its job scripts: the site's jobqueue settings, the template's options, the ``Job``.

:class:`JobScripts` is the half of :class:`~.backend.BatchBackend` that composes a worker's
dask-jobqueue ``Job``: its arguments (:meth:`JobScripts.job_kwargs`) from the template's options
over the site's ``jobqueue.<system>.*`` configuration (its jobqueue.yaml), and where the script is
written (:meth:`JobScripts.write_job`: the server's scheduler links' process, where distributed is
imported already, never the server itself). The other half submits, polls and cancels the jobs.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import dask.config

from clustermgr_lab.backends.batch.jobs import (
    WRITE_TIMEOUT,
    JobRequest,
    JobText,
    job_id_from_submit_output,
    jobqueue_class,
    write_job,
    write_job_message,
)
from clustermgr_lab.backends.local.backend import WORKER_PRELOAD_ENV, worker_preload_environment
from clustermgr_lab.common.security import REQUIRE_ENCRYPTION
from clustermgr_lab.domain import options as opt
from clustermgr_lab.domain.spec import WorkerGroup

if TYPE_CHECKING:
    from clustermgr_lab.backends.base import BackendContext

log = logging.getLogger(__name__)

#: dask configuration of every batch worker, under the template's ``worker_config``. The nanny forks its
#: worker, as it does for local workers, instead of starting a second interpreter that imports
#: distributed again: about a second of a compute node's CPU less per worker (4 workers on the two-node
#: test bed: create 2.9 s against 4.1 s, SLURM's queue wait left out).
WORKER_DEFAULTS = {"distributed.worker.multiprocessing-method": "fork"}


class JobScripts:
    """The job-script half of :class:`~.backend.BatchBackend`: the options a template sets, the ``Job`` they make.

    ``None`` leaves a setting to dask-jobqueue's configuration (``jobqueue.<system>.*``); a
    template's value wins over the site's (:meth:`set_by_template`).
    """

    queue: str | None = None
    account: str | None = None
    walltime: str | None = None
    job_extra_directives: tuple[str, ...] = ()
    job_script_prologue: tuple[str, ...] = ()
    interface: str | None = "lo"
    python: str = sys.executable
    local_directory: str | None = None
    gpu_directive: str | None = None
    worker_config: dict[str, str | int | float | bool] = {}  # a template's replaces it; never changed in place
    job_name_prefix = "clustermgr"
    #: The dask-jobqueue ``Job`` class that writes this system's job scripts: ``dask_jobqueue.<module>.<class>``.
    jobqueue_job: ClassVar[tuple[str, str]]
    #: That class's ``config_name``: the site's settings are ``jobqueue.<config_name>.*``.
    config_name: ClassVar[str]

    # What the backend it is half of provides (Backend's, title_environment() too).
    cluster_id: str
    address: str | None
    workdir: Path
    security: Any
    context: BackendContext

    @classmethod
    def job_class(cls):
        """The dask-jobqueue ``Job`` class that writes this system's job scripts (imported: it imports distributed)."""
        return jobqueue_class(*cls.jobqueue_job)

    @classmethod
    def submit_command(cls) -> str | None:
        """The command that submits this system's jobs (e.g. ``sbatch``), from its dask-jobqueue ``Job`` class.

        Examples
        --------
        >>> from clustermgr_lab.backends import BACKENDS
        >>> BACKENDS["slurm"].submit_command(), BACKENDS["local"].submit_command()
        ('sbatch', None)
        """
        try:
            return shlex.split(cls.job_class().submit_command)[0]
        except Exception:  # dask-jobqueue missing or broken: the backend's own error says more
            return None

    def job_name(self, name: str) -> str:
        return f"{self.job_name_prefix}-{self.cluster_id}-{name}"

    # -- the site's dask-jobqueue configuration (jobqueue.yaml) -----------------------------------------

    def site_config(self, key: str, *deprecated: str) -> Any:
        """The site's ``jobqueue.<system>.<key>`` from Dask's config (its jobqueue.yaml, ``DASK_JOBQUEUE__...``),
        or its ``deprecated`` name's, as dask-jobqueue reads it; None when unset."""
        for name in (key, *deprecated):
            value = dask.config.get(f"jobqueue.{self.config_name}.{name}", None)
            if value:
                return value
        return None

    def site_lines(self, key: str, *deprecated: str) -> list[str]:
        """A list option of the site's config (``job-script-prologue``...), as a list of strings."""
        value = self.site_config(key, *deprecated)
        if value is None or isinstance(value, Mapping):  # a mapping (HTCondor's directives): see directives()
            return []
        return [value] if isinstance(value, str) else [str(line) for line in value]

    def set_by_template(self, option: str) -> bool:
        """Whether the template (or a subclass) set ``option``, rather than leaving it to the defaults."""
        return option in vars(self) or getattr(type(self), option) is not getattr(JobScripts, option)

    @property
    def worker_interface(self) -> str | None:
        """The template's ``interface``; else the site's ``jobqueue.<system>.interface``; else ``lo`` (one node)."""
        if self.set_by_template("interface"):
            return self.interface
        return self.site_config("interface") or self.interface

    @property
    def worker_python(self) -> str:
        """The template's ``python`` (quoted); else the site's ``jobqueue.<system>.python`` (as written: it may
        carry arguments); else the server's interpreter."""
        if self.set_by_template("python"):
            return shlex.quote(self.python)
        return str(self.site_config("python") or shlex.quote(self.python))

    def system_directives(self, group: WorkerGroup) -> list[str]:
        """Directives this backend always gives its jobs on this queueing system (after the site's)."""
        return []

    def directives(self, group: WorkerGroup) -> list[str] | None:
        """Extra directives for one worker of ``group``: the site's (jobqueue config), this system's, the template's,
        the GPU request.

        A site's directives given as a mapping (HTCondor's submit description) cannot be merged with lines:
        None then (dask-jobqueue reads the site's own) when the template asks for none, else the template's.
        """
        directives = self.site_lines("job-extra-directives", "job-extra") + self.system_directives(group)
        directives += self.job_extra_directives
        if group.gpus and self.gpu_directive:
            directives.append(self.gpu_directive.format(gpus=group.gpus))
        if not directives and isinstance(self.site_config("job-extra-directives", "job-extra"), Mapping):
            return None
        return directives

    def job_kwargs(self, group: WorkerGroup, name: str) -> dict[str, Any]:
        """Arguments of the ``Job`` class for worker ``name`` of ``group``."""
        # dask-jobqueue rounds --memory-limit to 3 digits; a later flag wins, so give the exact bytes.
        extra = self.site_lines("worker-extra-args", "extra") + ["--memory-limit", str(group.memory)]
        # The worker's own HTTP routes (/health, /metrics) on its node's loopback only, never every interface, and
        # without its Bokeh pages, as local and SSH workers: importing Bokeh is 0.6 CPU-s of every worker's start.
        extra += ["--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
        if group.worker_resources:
            resources = " ".join(f"{k}={v}" for k, v in group.worker_resources.items())
            extra += ["--resources", shlex.quote(resources)]  # the command line is joined into a shell script
        worker_config = {**WORKER_DEFAULTS, **self.worker_config}
        prologue = self.site_lines("job-script-prologue", "env-extra")  # the site's module loads / conda activate
        prologue += [
            f"export {key}={shlex.quote(value)}"
            for key, value in {**opt.dask_config_environment(worker_config), **self.title_environment()}.items()
        ]
        if not group.gpus:  # CUDA shows it no device (left unset, it would see every GPU of the node)
            prologue.append("export CUDA_VISIBLE_DEVICES=''")
        prologue += self.job_script_prologue
        if self.security is not None:  # the work folder must be visible to the compute nodes (it is for the logs)
            extra += [shlex.quote(argument) for argument in self.security.cli_arguments()]
            prologue += [f"export {name}={value}" for name, value in REQUIRE_ENCRYPTION.items()]
            # ...and served over HTTPS to holders of the cluster's certificate only (clustermgr_lab.preloads.worker,
            # which the worker's Python must import: the server's interpreter does).
            preloads = worker_preload_environment(
                opt.dask_config_environment(worker_config).get(WORKER_PRELOAD_ENV) or os.environ.get(WORKER_PRELOAD_ENV)
            )
            for key, value in {**self.security.dashboard_environment(), **preloads}.items():
                prologue.append(f"export {key}={shlex.quote(value)}")
        return dict(
            scheduler=self.address,
            name=name,  # becomes `dask worker --name NAME`: how connected workers are matched
            job_name=self.job_name(name),
            cores=group.threads,
            memory=group.memory,
            processes=1,
            interface=self.worker_interface,
            # Checked by script_path already; quoted as well, since dask-jobqueue joins them into a shell line.
            # `exec`: the worker replaces the job's shell. Cancelling a job signals every process of it at once;
            # a shell killed first would leave the worker to init, out of reach of a system that tracks a
            # job's processes by parentage (SLURM's proctrack/linuxproc), still running after the job ended.
            python=f"exec {self.worker_python}",
            local_directory=shlex.quote(self.local_directory) if self.local_directory else None,
            log_directory=str(self.workdir),
            queue=self.queue,
            walltime=self.walltime,
            job_extra_directives=self.directives(group),
            job_script_prologue=prologue,
            worker_extra_args=extra,
        )

    def job_request(self, group: WorkerGroup, name: str, command: str | None = None) -> JobRequest:
        """The dask-jobqueue ``Job`` of worker ``name`` of ``group``: class and arguments (``command``: another one)."""
        return JobRequest(*self.jobqueue_job, self.job_kwargs(group, name), command)

    def job_script(self, group: WorkerGroup, name: str) -> str:
        """The batch script of worker ``name``, as dask-jobqueue writes it, written in this process."""
        return write_job(self.job_request(group, name)).script

    async def write_job(self, request: JobRequest) -> JobText:
        """``request``'s script and commands, written by the context's ``helper`` (the server's scheduler links'
        process) with this server's ``jobqueue`` settings; in this process when there is none, or when it cannot
        answer (a warning says so).

        Raises
        ------
        ValueError, RuntimeError
            What the ``Job`` class raised for these arguments, with its words.
        """
        helper = self.context.helper
        if helper is not None:
            message = {"op": "write_job", "job": request.to_message(), "jobqueue": dask.config.get("jobqueue", {})}
            try:
                return JobText.from_message(await helper.ask(message, WRITE_TIMEOUT))
            except OSError as exc:
                log.warning("cluster %s: job script written in the server: %s", self.cluster_id, exc)
        return write_job(request)

    #: The ``write_job`` operation where it runs (the links' process reaches it through the backends' registry).
    write_job_message = staticmethod(write_job_message)

    def job_id(self, text: JobText, out: str) -> str:
        """The job id in the submit command's output ``out`` (:func:`~.jobs.job_id_from_submit_output`).

        Raises
        ------
        ValueError
            When ``out`` has none.
        """
        return job_id_from_submit_output(text.job_id_regexp, out)
