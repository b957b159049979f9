"""Given a template whose backend options are wrong, the server serves no clusters (and logs which template and option).

That the message names both is tested on ``ClusterManager`` itself in ``test_hpc.py``; here, that a
server with such a configuration runs on without a half-configured cluster API and stops cleanly.
"""

from __future__ import annotations

import pytest
from tornado.httpclient import HTTPClientError

BAD = {
    "name": "gpu",
    "backend": "slurm",
    "options": {"walltime": "forever"},
    "spec": {"groups": [{"threads": 1, "memory": "1 GiB"}]},
}


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ClusterManager"]["templates"] = [BAD]
    return jp_server_config


async def test_a_bad_template_option_is_reported_at_start_and_nothing_is_served(jp_fetch, jp_serverapp):
    # Given the server started with the bad template (the jp_serverapp fixture)
    # Then the cluster API is not there (no half-configured manager), while the server runs on
    with pytest.raises(HTTPClientError) as missing:
        await jp_fetch("clustermgr", "api", "templates")
    assert missing.value.code == 404
    assert (await jp_fetch("api", "status")).code == 200
