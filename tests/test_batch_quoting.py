"""Given batch templates that offer ``python`` and ``local_directory`` as user options, then shell metacharacters are
refused with the field named (nothing is submitted), and what reaches dask-jobqueue's real job script is quoted."""

from __future__ import annotations

import shlex

import pytest

from clustermgr_lab.backends import SlurmBackend
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.options import parse_backend_options
from clustermgr_lab.domain.spec import parse_spec

from .helpers import call

GROUP = parse_spec({"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "300 MiB"}]}).groups[0]
HOSTILE = ["/tmp/$(id>/tmp/x)", "/usr/bin/python3;id", "/tmp/`id`", "/tmp/a b", "/tmp/x\nid", "/tmp/x|id", "/tmp/'x'"]
SITE = {
    "name": "hpc",
    "description": "SLURM, where users pick their Python and scratch folder",
    "backend": "slurm",
    "options": {"walltime": "00:10:00", "interface": "lo", "scheduler_interface": "lo"},
    "user_options": {
        "python": {"type": "string", "default": "/usr/bin/python3"},
        "local_directory": {"type": "string", "default": "/tmp"},
    },
    "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "300 MiB"}]},
}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [SITE]
    return jp_server_config


@pytest.mark.parametrize("option", ["python", "local_directory"])
async def test_shell_metacharacters_in_path_options_are_refused_with_the_field_named(jp_fetch, option):
    for value in HOSTILE:
        # When a user sets the option to a value with shell syntax
        status, body = await call(jp_fetch, "POST", "clusters", body={"template": "hpc", "options": {option: value}})
        # Then 400 naming the option, and no cluster
        assert (status, body["field"]) == (400, f"options.{option}"), (value, body)
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


@pytest.mark.parametrize("value", HOSTILE)
def test_the_backend_refuses_them_and_the_real_job_script_quotes_what_it_is_given(tmp_path, value):
    # The backend's option check refuses them too (a template's options go through it at server start)
    for option in ("python", "local_directory"):
        with pytest.raises(InvalidRequest) as refused:
            parse_backend_options({option: value}, SlurmBackend.template_options, "options")
        assert refused.value.field == f"options.{option}"
    # And if a value got past the checks, dask-jobqueue's job script would still pass it as one word
    backend = SlurmBackend("abc123", tmp_path, options={"python": "/usr/bin/python3", "local_directory": "/tmp"})
    backend.address = "tcp://127.0.0.1:8786"
    backend.python, backend.local_directory = value, value
    script = backend.job_script(GROUP, "default-1")
    command = script[script.rindex(shlex.quote(value) + " -m distributed.cli.dask_worker") :]  # it may span lines
    words = shlex.split(command)
    assert words[0] == value and words[words.index("--local-directory") + 1] == value, command


def test_ordinary_paths_are_unchanged_in_the_job_script(tmp_path):
    backend = SlurmBackend(
        "abc123", tmp_path, options={"python": "/shared/env-3.11/bin/python", "local_directory": "/scratch/dask_x"}
    )
    backend.address = "tcp://127.0.0.1:8786"
    command = backend.job_script(GROUP, "default-1").strip().splitlines()[-1]
    assert command.startswith("exec /shared/env-3.11/bin/python -m distributed.cli.dask_worker ")
    assert "--local-directory /scratch/dask_x " in command
