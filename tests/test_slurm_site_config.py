"""Given a site's jobqueue.yaml (Dask config ``jobqueue.slurm.*``), SLURM workers get its lines, then the product's.

The site's ``job-script-prologue``, ``job-extra-directives`` and ``worker-extra-args`` come first in each job
script, the template's after them; ``interface`` and ``python`` are the site's unless the template sets them.
Checked on the real single-node SLURM: the site's directive is in SLURM's record of the job, and the variable its
prologue exports is in the worker's environment.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import uuid

import dask.config
import pytest

from clustermgr_lab.backends.batch.slurm import SlurmBackend
from clustermgr_lab.domain.spec import parse_spec

from .helpers import call, cluster_client, delete_and_wait, requires_slurm, running_with, until, wait_for

WORKERS = {"name": "default", "count": 1, "threads": 1, "memory": "512 MiB"}
MARK = uuid.uuid4().hex[:8]
SITE_YAML = f"""
jobqueue:
  slurm:
    job-script-prologue:
      - export SITE_MARKER=site-{MARK}
    job-extra-directives:
      - --comment=site-{MARK}
    worker-extra-args:
      - --nthreads
      - "1"
    interface: lo
"""


@pytest.fixture
def site_jobqueue_yaml(tmp_path):
    """The site's jobqueue.yaml, read into this process's Dask config (the server's), as Dask reads /etc/dask."""
    folder = tmp_path / "etc-dask"
    folder.mkdir()
    (folder / "jobqueue.yaml").write_text(SITE_YAML)
    import dask_jobqueue  # noqa: F401 (its defaults join the config at import: before the copy that is put back)

    saved = copy.deepcopy(dask.config.config)
    dask.config.update(dask.config.config, dask.config.collect([str(folder)], env={}), priority="new")
    try:
        yield
    finally:
        dask.config.config.clear()
        dask.config.config.update(saved)


def test_the_sites_lines_come_first_then_the_templates(site_jobqueue_yaml, tmp_path):
    # Given the site's jobqueue.yaml, and a SLURM template with a prologue line and a directive of its own
    backend = SlurmBackend(
        "abc123",
        tmp_path,
        options={"job_script_prologue": ("export TEMPLATE_MARKER=1",), "job_extra_directives": ("--mail-type=NONE",)},
    )
    backend.address = "tcp://127.0.0.1:8786"
    # When a worker's job script is written
    script = backend.job_script(parse_spec({"groups": [WORKERS]}).groups[0], "default-1")
    lines = script.splitlines()
    # Then the site's prologue line comes before the product's exports and the template's line
    site, template = lines.index(f"export SITE_MARKER=site-{MARK}"), lines.index("export TEMPLATE_MARKER=1")
    assert site < lines.index("export DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD=fork") < template
    # And the site's directive before the product's and the template's
    directives = [line.removeprefix("#SBATCH ") for line in lines if line.startswith("#SBATCH ")]
    assert directives.index(f"--comment=site-{MARK}") < directives.index("--no-requeue")
    assert directives.index("--no-requeue") < directives.index("--mail-type=NONE")
    # And the site's worker arguments before the product's (a later flag wins: --memory-limit is ours)
    assert "--nthreads 1 --memory-limit" in lines[-1]
    # And the interface and Python are the site's where the template sets none
    assert lines[-1].startswith(f"exec {sys.executable} ") and lines[-1].endswith("--interface lo")


def test_interface_and_python_are_the_templates_when_it_sets_them(site_jobqueue_yaml, tmp_path):
    # Given the site's jobqueue.yaml with interface lo and a python, and a template setting both
    with dask.config.set({"jobqueue.slurm.python": "/opt/site/bin/python -X utf8"}):
        site = SlurmBackend("abc123", tmp_path)
        own = SlurmBackend("abc123", tmp_path, options={"interface": "eth7", "python": "/opt/template/bin/python"})
        group = parse_spec({"groups": [WORKERS]}).groups[0]
        for backend in (site, own):
            backend.address = "tcp://127.0.0.1:8786"
        # Then the site's apply to the first, the template's to the second
        command = site.job_script(group, "default-1").strip().splitlines()[-1]
        assert command.startswith("exec /opt/site/bin/python -X utf8 -m distributed.cli.dask_worker")
        command = own.job_script(group, "default-1").strip().splitlines()[-1]
        assert command.startswith("exec /opt/template/bin/python -m ") and command.endswith("--interface eth7")


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [
        {
            "name": "slurm",
            "description": "SLURM workers with a prologue line of the template's",
            "backend": "slurm",
            "options": {"job_script_prologue": [f"export TEMPLATE_MARKER=template-{MARK}"]},
            "spec": {"groups": [WORKERS]},
        }
    ]
    return jp_server_config


@pytest.mark.slurm
@requires_slurm
async def test_the_sites_prologue_and_directive_are_in_effect_on_slurm(site_jobqueue_yaml, jp_fetch, jp_serverapp):
    # Given the site's jobqueue.yaml read by the server, and a cluster from a SLURM template with a prologue of its own
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"template": "slurm"}, expect=202)
    cluster_id = cluster["id"]
    try:
        cluster = await wait_for(jp_fetch, cluster_id, running_with(1), what="1 worker in its SLURM job", timeout=180)
        backend = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend
        (job_id,) = backend.job_ids().values()
        # Then the submitted script has the site's lines, then the template's
        script = (backend.workdir / "default-1.job.sh").read_text()
        assert f"#SBATCH --comment=site-{MARK}" in script
        assert script.index(f"SITE_MARKER=site-{MARK}") < script.index(f"TEMPLATE_MARKER=template-{MARK}")
        # And SLURM has the site's directive in its record of the job
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True)
        assert f"Comment=site-{MARK}" in shown.stdout, shown.stdout
        # And the worker runs with what both prologues exported
        async with cluster_client(cluster, asynchronous=True) as client:
            seen = await client.run(lambda: (os.environ.get("SITE_MARKER"), os.environ.get("TEMPLATE_MARKER")))
        assert list(seen.values()) == [(f"site-{MARK}", f"template-{MARK}")]
    finally:
        await delete_and_wait(jp_fetch, cluster_id, timeout=120)

        async def no_jobs():
            out = subprocess.run(["squeue", "-h", "-n", f"clustermgr-{cluster_id}-default-1"], capture_output=True)
            return not out.stdout.strip()

        await until(no_jobs, 60, "the job to leave squeue")
