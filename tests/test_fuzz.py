"""Given a real server, when schemathesis sends requests generated from the OpenAPI document it serves
(valid and invalid ones), then no answer is a 5xx and every answer conforms to the document."""

import sys
from pathlib import Path

import pytest

from .helpers import run, subprocess_env

CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
]
TIME_BUDGET = 45  # seconds of fuzzing


@pytest.fixture
def jp_server_config(jp_server_config):
    # Generated bodies that are valid start real clusters: keep them few and small
    return {
        **jp_server_config,
        "ClusterManager": {**jp_server_config["ClusterManager"], "max_clusters": 2, "max_workers": 2},
    }


async def test_generated_requests_get_no_5xx_and_conforming_answers(
    jp_fetch, jp_http_port, jp_base_url, jp_auth_header, tmp_path
):
    document = f"http://127.0.0.1:{jp_http_port}{jp_base_url}clustermgr/api/openapi.json"
    code, out, err = await run(
        str(Path(sys.executable).with_name("st")),  # schemathesis' command, installed with the test extras
        "run", document,
        "--header", f"Authorization: {jp_auth_header['Authorization']}",
        "--checks", ",".join(CHECKS),
        "--phases", "examples,coverage,fuzzing",
        "--exclude-path", "/clustermgr/api/stream",  # a WebSocket: tests/test_stream.py
        "--exclude-path", "/clustermgr/api/clusters/{cluster_id}/logs/{name}/follow",  # a WebSocket: tests/test_logs.py
        "--max-time", str(TIME_BUDGET),
        "--max-examples", "60",
        "--request-timeout", "20",
        "--workers", "1",
        "--seed", "12",
        "--generation-database", "none",
        "--no-color",
        env=subprocess_env(SCHEMATHESIS_HOOKS=""),
        timeout=TIME_BUDGET + 90,
        cwd=tmp_path,  # schemathesis keeps a cache in the folder it runs in
    )  # fmt: skip
    print(out[-3000:])
    assert code == 0, f"schemathesis found problems:\n{out[-12000:]}\n{err[-2000:]}"
    assert "passed" in out
