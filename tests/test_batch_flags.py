"""Given templates that offer their options to users, then no batch option value can carry another flag of the
batch system (a Grid Engine ``resource_spec`` of ``-q long -P otherproj``, a queue of ``-q``): each is a 400 naming
the field and nothing is created; options used as they are (directives, shell lines, a Cluster class to import) are
offered to users only as choices."""

from __future__ import annotations

import pytest

from clustermgr_lab.backends import BACKENDS, SGEBackend
from clustermgr_lab.backends.batch.backend import BatchBackend
from clustermgr_lab.domain.errors import InvalidRequest
from clustermgr_lab.domain.spec import parse_spec
from clustermgr_lab.manager.cluster_manager import ClusterManager

from .helpers import call

GROUP = parse_spec({"groups": [{"name": "default", "count": 1, "threads": 1, "memory": "300 MiB"}]}).groups[0]
SMUGGLING = ["h_vmem=4G -q long -P otherproj", "-q", "all.q -P otherproj", "x\t-P\tp", "-P otherproj"]
GRID_ENGINE = {
    "name": "sge-site",
    "description": "Grid Engine, where users pick resources, queue and project",
    "backend": "sge",
    "options": {"walltime": "00:10:00", "interface": "lo", "scheduler_interface": "lo"},
    "user_options": {
        "resource_spec": {"type": "string", "default": "h_vmem=1G"},
        "queue": {"type": "string", "default": "all.q"},
        "project": {"type": "string", "default": "research"},
        "scheduler_memory": {"type": "string", "default": "1 GiB"},
    },
    "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "300 MiB"}]},
}
#: Options whose value never reaches a command line or a job script's directives: the environment of the commands.
NOT_ON_A_COMMAND_LINE = {"slurm_conf"}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [GRID_ENGINE]
    return jp_server_config


@pytest.mark.parametrize("option", ["resource_spec", "queue", "project", "scheduler_memory"])
async def test_a_user_option_that_carries_other_flags_is_a_400_naming_it(jp_fetch, option):
    for value in SMUGGLING:
        # When a user sets the option to a value that holds further flags
        body = {"template": "sge-site", "options": {option: value}}
        status, error = await call(jp_fetch, "POST", "clusters", body=body)
        # Then 400 naming the option, and no cluster
        assert (status, error["field"]) == (400, f"options.{option}"), (value, error)
    _, listed = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listed["clusters"] == []


def test_every_batch_option_that_reaches_a_command_line_refuses_extra_flags():
    # Given every option of every batch backend that takes a single value (not the free-form lines a site writes)
    checked = []
    for name, backend in BACKENDS.items():
        if not issubclass(backend, BatchBackend):
            continue
        for option, declared in backend.template_options.items():
            if declared.free_form or declared.kind != "string" or option in NOT_ON_A_COMMAND_LINE:
                continue
            for value in SMUGGLING:
                # When it is given a value with another flag in it, Then it is refused, naming the option
                with pytest.raises(InvalidRequest) as refused:
                    declared.parse(value, f"options.{option}")
                assert refused.value.field == f"options.{option}", (name, option, value)
            checked.append(f"{name}.{option}")
    assert "sge.resource_spec" in checked and "slurm.qos" in checked and "pbs.account" in checked


def test_the_real_job_script_has_the_resources_as_one_directive(tmp_path):
    # Given a Grid Engine backend with a resource list, a queue and a project
    options = {"resource_spec": "h_vmem=1G,mem_req=1G,arch=lx-amd64", "queue": "all.q", "project": "research"}
    backend = SGEBackend("abc123", tmp_path, options=options)
    backend.address = "tcp://127.0.0.1:8786"
    # When dask-jobqueue writes its job script
    directives = [line for line in backend.job_script(GROUP, "default-1").splitlines() if line.startswith("#$ ")]
    # Then each is one directive, and there is one queue and one project
    assert "#$ -l h_vmem=1G,mem_req=1G,arch=lx-amd64" in directives, directives
    assert [d for d in directives if d.startswith("#$ -q")] == ["#$ -q all.q"]
    assert [d for d in directives if d.startswith("#$ -P")] == ["#$ -P research"]


@pytest.mark.parametrize("option", ["job_extra_directives", "job_script_prologue", "gpu_directive"])
def test_a_template_may_offer_free_form_options_only_as_choices(tmp_path, option):
    # Given a site template that offers directives (or shell lines) as a free user option
    value = "--gres=gpu:{gpus}" if option == "gpu_directive" else "--qos=debug"
    template = {**GRID_ENGINE, "user_options": {option: {"type": "string", "default": value}}}
    # When the server starts, Then it refuses, naming the template and the option's missing choices
    settings = {
        "workdir": str(tmp_path / "work"),
        "store_path": str(tmp_path / "store" / "clusters.sqlite3"),
        "include_builtin_templates": False,
        "default_template": "sge-site",
    }
    with pytest.raises(ValueError) as refused:
        ClusterManager(templates=[template], **settings)
    assert f"{option}.choices: is required" in str(refused.value), str(refused.value)
    # And with choices the site picked, it starts
    template["user_options"][option]["choices"] = [value]
    ClusterManager(templates=[template], **settings).store.close()


def test_a_template_may_offer_the_cluster_class_only_as_choices(tmp_path):
    # Given a site template that lets users name the Cluster class to import
    template = {
        "name": "any-class",
        "backend": "cluster-class",
        "options": {"class": "distributed.LocalCluster"},
        "user_options": {"class": {"type": "string", "default": "distributed.LocalCluster"}},
        "spec": {"groups": [{"name": "default", "count": 0, "threads": 1, "memory": "256 MiB"}]},
    }
    settings = {
        "workdir": str(tmp_path / "work"),
        "store_path": str(tmp_path / "store" / "clusters.sqlite3"),
        "include_builtin_templates": False,
        "default_template": "any-class",
    }
    # When the server starts, Then it refuses: a request could import a module of its choice
    with pytest.raises(ValueError) as refused:
        ClusterManager(templates=[template], **settings)
    assert "user_options.class.choices: is required" in str(refused.value), str(refused.value)
    # And with the classes the site chose, it starts
    template["user_options"]["class"]["choices"] = ["distributed.LocalCluster"]
    ClusterManager(templates=[template], **settings).store.close()
