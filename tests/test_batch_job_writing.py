"""Given the batch backends, their job scripts are dask-jobqueue's, written outside the Jupyter server's process.

The server knows of each dask-jobqueue ``Job`` class only what it needs without importing it (its
configuration section, cancel command, how a job id is read): checked here against the classes. The
scripts are written in the scheduler links' process, with the server's ``jobqueue`` settings, and in
the server itself when that process cannot answer. (A server that runs a SLURM cluster and never
loads distributed: ``test_idle_footprint.py``.)
"""

from __future__ import annotations

import logging

import dask.config
import pytest

from clustermgr_lab.backends import BACKENDS, BackendContext, BatchBackend
from clustermgr_lab.backends.batch.jobs import JobRequest, write_job
from clustermgr_lab.cluster.hosted_link import LinkHost
from clustermgr_lab.domain.spec import parse_spec

BATCH = [cls for cls in (BACKENDS[name] for name in BACKENDS) if issubclass(cls, BatchBackend)]
GROUP = parse_spec({"groups": [{"name": "default", "count": 1, "threads": 2, "memory": "300 MiB"}]}).groups[0]

#: What each system's submit command prints (and what it prints when it refuses), by backend.
SUBMIT_OUTPUTS = {
    "slurm": ["Submitted batch job 4242", "sbatch: error: Batch job submission failed"],
    "sge": ['Your job 17 ("clustermgr-abc-default-1") has been submitted', "Unable to run job"],
    "pbs": ["1234.pbs-server", "qsub: Unknown queue"],
    "lsf": ["Job <5678> is submitted to queue <normal>.", "Bad resource requirement syntax"],
    "htcondor": ["Submitting job(s).\n1 job(s) submitted to cluster 99.", "ERROR: on line 3"],
}


def backend_of(cls: type[BatchBackend], tmp_path, **context) -> BatchBackend:
    backend = cls("abc123", BackendContext(tmp_path, **context))
    backend.address = "tcp://10.0.0.1:8786"
    return backend


@pytest.mark.parametrize("cls", BATCH, ids=lambda cls: cls.name)
def test_what_the_server_knows_of_each_job_class_is_the_class_own(cls):
    # Given a batch backend and the dask-jobqueue class that writes its jobs
    job_class = cls.job_class()
    # Then its configuration section and cancel command are the class's
    assert (cls.config_name, cls.cancel_command) == (job_class.config_name, job_class.cancel_command)
    assert cls.submit_command() == job_class.submit_command.split()[0]


@pytest.mark.parametrize("cls", BATCH, ids=lambda cls: cls.name)
def test_a_job_id_is_read_from_the_submit_output_as_dask_jobqueue_reads_it(cls, tmp_path):
    # Given a worker's job, written, and the Job object dask-jobqueue makes of the same arguments
    backend = backend_of(cls, tmp_path)
    request = backend.job_request(GROUP, "default-1")
    text = write_job(request)
    job = cls.job_class()(**request.kwargs)
    # When the job id is read from what the submit command printed (accepted, refused)
    for out in SUBMIT_OUTPUTS[cls.name]:
        try:
            expected = job._job_id_from_submit_output(out)
        except ValueError as exc:
            # Then a refusal is the same ValueError, in the same words
            with pytest.raises(ValueError) as ours:
                backend.job_id(text, out)
            assert str(ours.value) == str(exc)
        else:
            # And an accepted job has the same id
            assert backend.job_id(text, out) == expected
    assert text.script == job.job_script() and text.submit_command == job.submit_command


async def test_job_scripts_are_written_in_the_links_process_with_the_servers_settings(tmp_path, caplog):
    # Given the scheduler links' process, and a setting this server made at run time (not in any file the
    # process reads)
    host = LinkHost(busy=lambda: False)
    backend = backend_of(BACKENDS["slurm"], tmp_path, helper=host)
    request = backend.job_request(GROUP, "default-1")
    try:
        with caplog.at_level(logging.WARNING), dask.config.set({"jobqueue.slurm.job-directives-skip": ["-J "]}):
            # When a worker's job is written
            text = await backend.write_job(request)
            here = write_job(request)
        # Then it was written there, the same as in this process, with this server's setting
        assert host.pid is not None and "written in the server" not in caplog.text
        assert text == here
        assert "#SBATCH -J" not in text.script and "#SBATCH -J" in write_job(request).script
    finally:
        await host.close()


async def test_a_job_is_written_in_the_server_when_the_links_process_cannot(tmp_path, caplog):
    # Given a links' process that no longer answers (closed, as at a server stop)
    host = LinkHost(busy=lambda: False)
    await host.close()
    backend = backend_of(BACKENDS["sge"], tmp_path, helper=host)
    request = backend.job_request(GROUP, "default-1")
    # When a worker's job is written
    with caplog.at_level(logging.WARNING):
        text = await backend.write_job(request)
    # Then the server wrote it itself, and said so
    assert text == write_job(request)
    assert "job script written in the server" in caplog.text


async def test_bad_job_arguments_are_the_job_class_error_not_a_fallback(tmp_path, caplog):
    # Given the links' process, and a job whose arguments dask-jobqueue refuses
    host = LinkHost(busy=lambda: False)
    backend = backend_of(BACKENDS["slurm"], tmp_path, helper=host)
    request = JobRequest(*backend.jobqueue_job, {**backend.job_request(GROUP, "default-1").kwargs, "memory": "lots"})
    try:
        # When it is written, Then the class's own error says why, and nothing is written in the server
        with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="lots"):
            await backend.write_job(request)
        assert "written in the server" not in caplog.text
    finally:
        await host.close()
