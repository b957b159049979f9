"""Given the OpenAPI document, then it is valid, served, covers every route, and its schemas catch mistakes."""

import copy
import json
import re

import pytest
from openapi_spec_validator import validate as validate_openapi

from clustermgr_lab.web.openapi import DOCUMENT, openapi_document
from clustermgr_lab.web.routes import route_table

from .helpers import call, validate_schema

CLUSTER = {
    "id": "3f9c2a1b",
    "name": "Cluster 1",
    "template": "local",
    "backend": "local",
    "capabilities": {
        "can_scale": True, "can_stop": True, "multiple_groups": True, "readoptable": True, "runs_processes_here": True,
        "exact_retire": True, "editable_spec": True, "enforces_tls": True, "reasons": {},
    },
    "status": "running",
    "error": None,
    "scheduler_address": "tls://127.0.0.1:40123",
    "tls": {
        "ca_file": "/run/user/1000/jupyter/clustermgr/3f9c2a1b/tls/ca.pem",
        "cert": "/run/user/1000/jupyter/clustermgr/3f9c2a1b/tls/cert.pem",
        "key": "/run/user/1000/jupyter/clustermgr/3f9c2a1b/tls/key.pem",
    },
    "dashboard_url": "/clustermgr/dashboard/3f9c2a1b/key-Zq0tW1sVb3Hc8xYkR2mN4A/status",
    "spec": {"groups": [{"name": "default", "count": 2, "threads": 1, "memory": 1073741824, "gpus": 0, "resources": {}}]},
    "workers": {
        "requested": 2, "running": 2, "pending": 0, "pending_reasons": {}, "waiting": [], "stopping": 0,
        "groups": [{"name": "default", "requested": 2, "running": 2, "pending": 0, "pending_reasons": {}, "error": None}],
    },
    "resources": {"cores": 2, "memory": 2147483648, "gpus": 0},
    "adapt": None,
    "options": {},
    "idle_timeout": 1800,
    "last_decision": {
        "time": "2026-11-29T18:30:00.123456+00:00", "kind": "scale", "message": "manual scale",
        "group": "default", "before": 0, "after": 2, "source": "manual",
    },
    "created": "2026-11-29T18:30:00.123456+00:00",
    "usage": {
        "core_seconds": 7200.0, "gpu_seconds": 0.0, "memory_seconds": 7730941132800.0,
        "as_of": "2026-11-29T19:30:00.123456+00:00", "rate": {"cores": 2.0, "gpus": 0.0, "memory": 2147483648.0},
        "groups": [{
            "name": "default", "core_seconds": 7200.0, "gpu_seconds": 0.0, "memory_seconds": 7730941132800.0,
            "rate": {"cores": 2.0, "gpus": 0.0, "memory": 2147483648.0},
        }],
    },
}  # fmt: skip


def test_the_document_is_valid_openapi_3_1():
    document = json.loads(DOCUMENT.read_text())
    assert document["openapi"].startswith("3.1.")
    validate_openapi(document)


def test_every_route_is_documented_and_every_documented_path_is_routed():
    routed = {
        "/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
        for pattern, _ in route_table()
        if pattern.startswith("clustermgr/api/")
    }
    assert routed == set(openapi_document()["paths"])


async def test_the_server_serves_the_document_for_its_base_url(jp_fetch, jp_base_url):
    _, served = await call(jp_fetch, "GET", "openapi.json", expect=200)
    assert served == {**json.loads(DOCUMENT.read_text()), "servers": [{"url": jp_base_url.rstrip("/")}]}


def examples():
    """Every request body example in the document, with the schema it illustrates."""
    for path, item in openapi_document()["paths"].items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            for name, example in content.get("examples", {}).items():
                yield pytest.param(path, method, example["value"], id=f"{method} {path} {name}")


@pytest.mark.parametrize("path, method, value", list(examples()))
def test_request_examples_match_their_schemas(path, method, value):
    where = ("paths", path, method, "requestBody", "content", "application/json", "schema")
    validate_schema(value, *where, what=f"example of {method} {path}")


def test_the_docs_example_cluster_is_a_cluster():
    validate_schema(CLUSTER, "components", "schemas", "Cluster", what="example")


@pytest.mark.parametrize(
    "mistake",
    [
        lambda c: c.update(status="started"),
        lambda c: c.update(extra=1),
        lambda c: c.update(resolved={"group": "default", "workers": 2, "cores": 2, "memory": 2, "gpus": 0}),
        lambda c: c.pop("error"),
        lambda c: c["resources"].update(memory="2 GiB"),
        lambda c: c["spec"]["groups"][0].update(threads=0),
        lambda c: c["workers"].update(running=-1),
        lambda c: c["last_decision"].update(kind="guess"),
        lambda c: c.update(created="yesterday"),
        lambda c: c.update(adapt={"minimum": 0, "maximum": 4}),
        lambda c: c["usage"].update(core_hours=2.0),
        lambda c: c["usage"]["groups"][0].pop("rate"),
    ],
    ids=["status", "unknown field", "resolved outside a PATCH", "missing field", "preformatted size",
         "zero threads", "negative count", "event kind", "date", "request-shaped adapt", "usage field",
         "usage group without rate"],
)  # fmt: skip
def test_the_cluster_schema_catches_mistakes(mistake):
    cluster = copy.deepcopy(CLUSTER)
    mistake(cluster)
    with pytest.raises(AssertionError, match="does not match the OpenAPI document"):
        validate_schema(cluster, "components", "schemas", "Cluster", what="a wrong cluster")


def test_a_patch_answer_may_say_what_a_scale_resolved_to():
    resolved = {"group": "default", "workers": 2, "cores": 2, "memory": 2147483648, "gpus": 0}
    validate_schema({**CLUSTER, "resolved": resolved}, "components", "schemas", "ClusterChange", what="PATCH answer")
    with pytest.raises(AssertionError):
        validate_schema(
            {**CLUSTER, "resolved": {"workers": 2}}, "components", "schemas", "ClusterChange", what="partial"
        )


def test_adapt_bounds_are_counts_unless_the_unit_is_memory():
    adapt = ("components", "schemas", "Adapt")
    validate_schema({"minimum": "1 GiB", "maximum": "4 GiB", "unit": "memory"}, *adapt, what="memory range")
    validate_schema({"minimum": 0, "maximum": 4}, *adapt, what="worker range")
    for wrong in ({"minimum": "1 GiB", "maximum": 4}, {"minimum": 0, "maximum": "4 GiB", "unit": "cores"},
                  {"minimum": 0, "maximum": 10**12}, {"minimum": "GiB", "maximum": "2 GiB", "unit": "memory"}):  # fmt: skip
        with pytest.raises(AssertionError, match="does not match the OpenAPI document"):
            validate_schema(wrong, *adapt, what="a wrong adapt range")
