"""Given a real Jupyter server, when a request is bad or not allowed, then a JSON error answers it and nothing changes."""

import asyncio

import pytest
from jupyter_server.auth import Authorizer
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from clustermgr_lab.web.routes import AUTH_RESOURCE

from .helpers import call, call_as, running_with, strict_json, validate_schema, wait_for, wait_gone

SMALL = {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB"}]}
NO_TOKEN = {"Authorization": ""}


def group(**fields):
    return {"groups": [{"count": 1, "threads": 1, "memory": "256 MiB", **fields}]}


# body sent to POST clusters -> the field the 400 names (None: the body as a whole) and words of its message
CREATE_CASES = [
    ('{"name": ', None, "not valid JSON"),
    ("[1, 2]", None, "must be a JSON object"),
    ('"a cluster"', None, "must be a JSON object"),
    ({"nme": "typo"}, "nme", "unknown field"),
    ({"": True}, None, "unknown field ''"),
    ({"x" * 10**6: 1}, "x" * 170 + "... (1000000 characters)", "unknown field 'xxx"),
    ({"template": "nope"}, "template", "unknown template 'nope'"),
    ({"template": ["local"]}, "template", "unknown template"),
    ({"template": ""}, "template", "unknown template ''"),
    ({"name": ""}, "name", "non-empty string"),
    ({"name": 5}, "name", "non-empty string"),
    ({"spec": "big"}, "spec", "must be an object"),
    ({"spec": {"groups": []}}, "spec.groups", "non-empty list"),
    ({"spec": group(memory=-1)}, "spec.groups[0].memory", "positive size"),
    ({"spec": group(memory=0)}, "spec.groups[0].memory", "positive size"),
    ({"spec": group(memory="lots")}, "spec.groups[0].memory", "not a size"),
    ({"spec": group(memory="1e400 GB")}, "spec.groups[0].memory", "not a size"),
    ({"spec": group(memory=True)}, "spec.groups[0].memory", "must be a size"),
    ({"spec": group(threads=0)}, "spec.groups[0].threads", "at least 1"),
    ({"spec": group(threads="two")}, "spec.groups[0].threads", "whole number"),
    ({"spec": group(count=-1)}, "spec.groups[0].count", "at least 0"),
    ({"spec": group(count=1.5)}, "spec.groups[0].count", "whole number"),
    ({"spec": group(count=True)}, "spec.groups[0].count", "whole number"),
    ({"spec": group(gpus=-1)}, "spec.groups[0].gpus", "at least 0"),
    ({"spec": group(resources={"ssd": 0})}, "spec.groups[0].resources.ssd", "positive number"),
    (
        '{"spec": {"groups": [{"threads": 1, "memory": 1e9, "resources": {"ssd": 1e400}}]}}',
        "spec.groups[0].resources.ssd",
        "positive number",
    ),
    ({"spec": {"groups": [{"threads": 1}]}}, "spec.groups[0].memory", "is required"),
    ({"spec": group(count=13)}, "spec.groups", "the limit is 12"),
    ({"adapt": {"minimum": 3, "maximum": 1}}, "adapt.minimum", "larger than maximum"),
    ({"adapt": {"minimum": 0, "maximum": 13}}, "adapt.maximum", "the limit is 12"),
    ({"adapt": {"minimum": 0, "maximum": 2, "unit": "gpus"}}, "adapt.unit", "must be one of"),
    # numbers too large for a float, sizes with no number, nesting deeper than any body needs
    ({"spec": group(memory=10**400)}, "spec.groups[0].memory", "at most 8 EiB"),
    ({"spec": group(threads=10**400)}, "spec.groups[0].threads", "at most"),
    ({"spec": group(memory="")}, "spec.groups[0].memory", "not a size"),
    ({"spec": group(memory="GiB")}, "spec.groups[0].memory", "not a size"),
    ({"spec": group(resources={"ssd": 10**400})}, "spec.groups[0].resources.ssd", "positive number up to"),
    ({"adapt": {"minimum": 0, "maximum": 10**400}}, "adapt.maximum", "at most"),
    ("[" * 100_000 + "]" * 100_000, "[0]" * 32, "nested deeper than 32 levels"),
    ('{"spec": ' + "[" * 100_000 + "]" * 100_000 + "}", "spec" + "[0]" * 31, "nested deeper than 32 levels"),
    (
        '{"spec": {"groups": [' + "{}, " * 3 + '{"a": ' + "[" * 40 + "]" * 40 + "}]}}",
        "spec.groups[3].a" + "[0]" * 28,
        "nested",
    ),
    ('{"name": NaN}', None, "NaN is not a JSON value"),
    # what the machine and the server's caps allow
    ({"spec": group(gpus=10_000_000)}, "spec.groups[0].gpus", "GPUs per worker, but this machine has"),
    ({"spec": group(memory="100 TiB")}, "spec.groups[0].memory", "per worker; this machine has"),
    (
        {"spec": {"groups": [{"name": f"g{i}", "threads": 1, "memory": 1} for i in range(20_000)]}},
        "spec.groups",
        "20000 worker groups; the limit is 16",
    ),
    ({"spec": group(count=12, threads=100)}, "spec.groups", "1200 cores in all; the limit is 1024"),
    # names that would break a job script, a command line, a terminal or a log
    ({"spec": group(name="cpu\n")}, "spec.groups[0].name", "letters, digits"),
    ({"spec": group(resources={"ssd\n": 1})}, "spec.groups[0].resources.ssd\n", "not a valid resource name"),
    ({"name": "evil\n[INFO] all good"}, "name", "found U+000A"),
    ({"name": "red\x1b[31m"}, "name", "found U+001B"),
    ({"name": "lone \ud800 surrogate"}, "name", "found U+D800"),
    ({"name": "txt.exe\u202egnp"}, "name", "found U+202E"),
]

# body sent to PATCH clusters/{id} of a running cluster of one group, "default", of 1 worker
PATCH_CASES = [
    ('{"scale": ', None, "not valid JSON"),
    ("[]", None, "must be a JSON object"),
    ({}, None, "exactly one of"),
    ({"name": "x", "scale": {"workers": 1}}, None, "exactly one of"),
    ({"size": 3}, "size", "unknown field"),
    ({"scale": 3}, "scale", "must be an object"),
    ({"scale": {}}, "scale", "exactly one of"),
    ({"scale": {"workers": 1, "cores": 1}}, "scale", "exactly one of"),
    ({"scale": {"workers": 1, "extra": 1}}, "scale.extra", "unknown field"),
    ({"scale": {"workers": -1}}, "scale.workers", "at least 0"),
    ({"scale": {"workers": 0.5}}, "scale.workers", "whole number"),
    ({"scale": {"workers": "3"}}, "scale.workers", "whole number"),
    ({"scale": {"workers": True}}, "scale.workers", "whole number"),
    ({"scale": {"workers": None}}, "scale.workers", "whole number"),
    ({"scale": {"cores": -2}}, "scale.cores", "at least 0"),
    ({"scale": {"memory": "lots"}}, "scale.memory", "not a size"),
    ({"scale": {"memory": -5}}, "scale.memory", "positive size"),
    ({"scale": {"memory": "1e400"}}, "scale.memory", "not a size"),
    ({"scale": {"workers": 13}}, "scale.workers", "the limit is 12"),
    ({"scale": {"cores": 13}}, "scale.cores", "the limit is 12"),
    ({"scale": {"workers": 2, "group": "gpu"}}, "scale.group", "unknown group 'gpu'"),
    ({"scale": {"workers": 2, "group": 7}}, "scale.group", "group name"),
    ({"spec": group(threads=0)}, "spec.groups[0].threads", "at least 1"),
    ({"spec": group(count=13)}, "spec.groups", "the limit is 12"),
    ({"spec": {"groups": [{**group()["groups"][0], "name": "a"}] * 2}}, "spec.groups[1].name", "used twice"),
    ({"adapt": "on"}, "adapt", "must be an object"),
    ({"adapt": {"minimum": 4, "maximum": 2}}, "adapt.minimum", "larger than maximum"),
    ({"adapt": {"minimum": 0, "maximum": 13}}, "adapt.maximum", "the limit is 12"),
    ({"adapt": {"minimum": 0, "maximum": 13, "unit": "cores"}}, "adapt.maximum", "the limit is 12"),
    ({"adapt": {"minimum": -1, "maximum": 2}}, "adapt.minimum", "at least 0"),
    ({"adapt": {"minimum": False, "maximum": 2}}, "adapt.minimum", "whole number"),
    ({"adapt": {"minimum": 0, "maximum": "many"}}, "adapt.maximum", "whole number"),
    ({"adapt": {"maximum": 2}}, "adapt.minimum", "is required"),
    ({"adapt": {"minimum": 0, "maximum": 2, "group": "nope"}}, "adapt.group", "unknown group"),
    ({"adapt": {"minimum": 0, "maximum": 2, "unit": "gpus"}}, "adapt.unit", "must be one of"),
    ({"adapt": {"minimum": 0, "maximum": 2, "interval": 0}}, "adapt.interval", "seconds"),
    ({"adapt": {"minimum": 0, "maximum": 2, "wait_count": 0}}, "adapt.wait_count", "at least 1"),
    ({"adapt": {"minimum": 0, "maximum": 2, "speed": 1}}, "adapt.speed", "unknown field"),
    ({"name": ""}, "name", "non-empty string"),
    ({"name": "x" * 81}, "name", "at most 80"),
    ({"name": 7}, "name", "non-empty string"),
    ({"name": "tab\there"}, "name", "found U+0009"),
    ({"scale": {"cores": 10**400}}, "scale.cores", "at most"),
    ({"scale": {"memory": 10**400}}, "scale.memory", "at most"),
    ({"scale": {"memory": ""}}, "scale.memory", "not a size"),
    ({"scale": {"memory": "GiB"}}, "scale.memory", "not a size"),
    ({"adapt": {"minimum": 0, "maximum": 10**400, "unit": "memory"}}, "adapt.maximum", "at most"),
    ({"adapt": {"minimum": 10**400, "maximum": 10**400, "unit": "cores"}}, "adapt.minimum", "at most"),
    ({"spec": group(gpus=5)}, "spec.groups[0].gpus", "asks for 5 GPUs per worker, but this machine has 4 GPUs"),
    ({"spec": group(count=5, gpus=1)}, "spec.groups", "5 GPUs in all; this machine has 4"),
    ('{"scale": ' + "{" * 50_000, None, "not valid JSON"),
    ('{"scale": ' + '{"a": ' * 50_000 + "1" + "}" * 50_001, "scale" + ".a" * 31, "nested deeper than 32 levels"),
]


def assert_invalid(status, error, field, words):
    """A 400 whose JSON names the field at fault (in ``field`` and in the message) and says what is wrong."""
    assert status == 400, (status, error)
    assert error["code"] == "invalid", error
    assert words in error["message"], error
    if field is None:
        assert "field" not in error, error
    else:
        assert error["field"] == field, error
        assert field in error["message"], error


async def snapshot(jp_fetch, cluster_id):
    """Everything a refused request must leave as it was: the cluster and its event log."""
    _, cluster = await call(jp_fetch, "GET", "clusters", cluster_id, expect=200)
    _, events = await call(jp_fetch, "GET", "clusters", cluster_id, "events", expect=200)
    return cluster, events["events"]


async def running_cluster(jp_fetch):
    _, cluster = await call(jp_fetch, "POST", "clusters", body={"name": "target", "spec": SMALL}, expect=202)
    return await wait_for(jp_fetch, cluster["id"], running_with(1), what="1 running worker")


async def test_invalid_new_clusters_are_refused_and_nothing_is_created(jp_fetch, subtests):
    for body, field, words in CREATE_CASES:
        with subtests.test(body=body):
            # When a cluster is asked for with a bad body
            status, error = await call(jp_fetch, "POST", "clusters", body=body)
            # Then a 400 names the field and what is wrong, and no cluster exists
            assert_invalid(status, error, field, words)
            _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
            assert listing["clusters"] == []


async def test_invalid_changes_are_refused_and_leave_the_cluster_as_it_was(jp_fetch, subtests):
    # Given a running cluster of one worker
    cluster_id = (await running_cluster(jp_fetch))["id"]
    for body, field, words in PATCH_CASES:
        with subtests.test(body=body):
            before = await snapshot(jp_fetch, cluster_id)
            # When a bad change is asked for
            status, error = await call(jp_fetch, "PATCH", "clusters", cluster_id, body=body)
            # Then a 400 names the field and what is wrong, and the cluster (spec, adapt,
            # workers, name, event log) is exactly as it was
            assert_invalid(status, error, field, words)
            assert await snapshot(jp_fetch, cluster_id) == before


async def test_unknown_ids_are_404_even_with_a_bad_body(jp_fetch):
    for method, path, body in [
        ("GET", ("clusters", "nope"), None),
        ("DELETE", ("clusters", "nope"), None),
        ("PATCH", ("clusters", "nope"), {"scale": {"workers": 1}}),
        ("PATCH", ("clusters", "nope"), {"scale": {"workers": -1}}),
        ("GET", ("clusters", "nope", "events"), None),
    ]:
        status, error = await call(jp_fetch, method, *path, body=body)
        assert status == 404 and error["code"] == "not_found" and "'nope'" in error["message"], (method, path, error)
    # ids of any shape get the same JSON 404 (not Jupyter's HTML page)
    for weird in ("bad id!", "é", "a.b", "%00"):
        status, error = await call(jp_fetch, "GET", "clusters", weird)
        assert status == 404 and error["code"] == "not_found", (weird, error)


async def test_changing_a_stopping_cluster_is_a_conflict(jp_fetch, jp_serverapp, monkeypatch):
    # Given a cluster that is stopping, and stays so until this test lets its backend go on
    cluster_id = (await running_cluster(jp_fetch))["id"]
    backend = jp_serverapp.web_app.settings["clustermgr_manager"].get(cluster_id).backend
    release, close = asyncio.Event(), backend.close

    async def held_close():
        await release.wait()
        await close()

    monkeypatch.setattr(backend, "close", held_close)
    try:
        _, stopping = await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
        assert stopping["status"] == "stopping"
        before = await snapshot(jp_fetch, cluster_id)
        # When it is scaled, given a new spec, or made adaptive
        for body in ({"scale": {"workers": 2}}, {"spec": group(count=2)}, {"adapt": {"minimum": 0, "maximum": 2}}):
            status, error = await call(jp_fetch, "PATCH", "clusters", cluster_id, body=body)
            # Then each is a 409 that says why, and changes nothing
            assert status == 409, (body, status, error)
            assert error["code"] == "conflict" and "stopping" in error["message"], error
        assert await snapshot(jp_fetch, cluster_id) == before
        # And deleting it again is not an error
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)
    finally:
        release.set()
    # And once its processes are stopped, it is gone
    assert await wait_gone(jp_fetch, cluster_id, 60) == 404


async def test_one_cluster_more_than_the_server_allows_is_a_conflict(jp_fetch, jp_serverapp):
    # Given a server that allows one cluster, and that one running
    jp_serverapp.web_app.settings["clustermgr_manager"].max_clusters = 1
    cluster_id = (await running_cluster(jp_fetch))["id"]
    # When another is asked for
    status, error = await call(jp_fetch, "POST", "clusters", body={"spec": SMALL})
    # Then it is a 409, and there is still one cluster
    assert status == 409 and error["code"] == "conflict", error
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert [c["id"] for c in listing["clusters"]] == [cluster_id]


async def test_cluster_names_are_unique(jp_fetch):
    # Given a cluster called "target"
    first = await running_cluster(jp_fetch)
    _, other = await call(jp_fetch, "POST", "clusters", body={"name": "other", "spec": SMALL}, expect=202)
    await wait_for(jp_fetch, other["id"], running_with(1), what="the other cluster running")  # then it stays as it is
    before = await snapshot(jp_fetch, other["id"])
    # When another cluster is created, or renamed, with that name
    for method, path, body in [
        ("POST", ("clusters",), {"name": "target", "spec": SMALL}),
        ("PATCH", ("clusters", other["id"]), {"name": "target"}),
    ]:
        status, error = await call(jp_fetch, method, *path, body=body)
        # Then it is a 409 naming the field, and nothing changes
        assert status == 409 and error["field"] == "name" and "'target'" in error["message"], error
    assert await snapshot(jp_fetch, other["id"]) == before
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert sorted(c["name"] for c in listing["clusters"]) == ["other", "target"]
    # And renaming a cluster to its own name is fine
    await call(jp_fetch, "PATCH", "clusters", first["id"], body={"name": "target"}, expect=200)
    for cluster_id in (first["id"], other["id"]):
        await call(jp_fetch, "DELETE", "clusters", cluster_id, expect=202)


# -- authentication and authorization ---------------------------------------------------------------

EVERY_CALL = [
    ("GET", ("clusters",), None),
    ("POST", ("clusters",), {"spec": SMALL}),
    ("GET", ("clusters", "nope"), None),
    ("PATCH", ("clusters", "nope"), {"scale": {"workers": 1}}),
    ("DELETE", ("clusters", "nope"), None),
    ("GET", ("clusters", "nope", "events"), None),
    ("GET", ("templates",), None),
    ("GET", ("status",), None),
    ("GET", ("openapi.json",), None),
]


async def websocket_refusal(jp_ws_fetch, headers):
    """Open the stream; return the refusal's ``(status, JSON error)``, or fail if it opens."""
    try:
        connection = await jp_ws_fetch("clustermgr", "api", "stream", headers=headers)
    except HTTPClientError as exc:
        error = strict_json(exc.response.body)
        validate_schema(error, "components", "schemas", "Error", what=f"stream refusal {exc.code}")
        return exc.code, error
    connection.close()
    raise AssertionError(f"the stream accepted a connection with {headers}")


async def test_every_endpoint_refuses_requests_without_a_valid_token(jp_fetch, jp_ws_fetch):
    for headers in (NO_TOKEN, {"Authorization": "token wrong"}):
        for method, path, body in EVERY_CALL:
            status, error = await call_as(jp_fetch, headers, method, *path, body=body)
            assert status == 403 and error["code"] == "forbidden", (headers, method, path, error)
        status, error = await websocket_refusal(jp_ws_fetch, headers)
        assert status == 403 and "not authenticated" in error["message"], error
    # And nothing was created
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listing["clusters"] == []


class DenyClustermgr(Authorizer):
    """Allows everything except any action on the clustermgr resource."""

    def is_authorized(self, handler, user, action, resource):
        return resource != AUTH_RESOURCE


class DenyClustermgrWrites(Authorizer):
    """Allows everything except writing to the clustermgr resource."""

    def is_authorized(self, handler, user, action, resource):
        return not (resource == AUTH_RESOURCE and action == "write")


@pytest.fixture
def jp_server_config(jp_server_config, request):
    """The shared configuration, plus ServerApp settings that a test gives as an indirect parameter."""
    extra = getattr(request, "param", {})
    return {**jp_server_config, "ServerApp": {**jp_server_config["ServerApp"], **extra}}


@pytest.mark.parametrize("jp_server_config", [{"authorizer_class": DenyClustermgr}], indirect=True)
async def test_the_authorizer_decides_on_a_resource_of_our_own(jp_fetch, jp_ws_fetch):
    # Given an authorizer that refuses everything on the clustermgr resource
    # When any endpoint or the stream is called with a valid token
    for method, path, body in EVERY_CALL:
        status, error = await call(jp_fetch, method, *path, body=body)
        # Then it is refused, naming the action and the resource
        action = "read" if method == "GET" else "write"
        assert status == 403 and f"not authorized to {action} on resource: clustermgr" in error["message"], error
    status, error = await websocket_refusal(jp_ws_fetch, None)
    assert status == 403 and "not authorized to read on resource: clustermgr" in error["message"], error
    # While Jupyter's own API, on its own resources, still answers
    response = await jp_fetch("api", "contents")
    assert response.code == 200


@pytest.mark.parametrize("jp_server_config", [{"authorizer_class": DenyClustermgrWrites}], indirect=True)
async def test_reading_and_writing_are_authorized_separately(jp_fetch, jp_ws_fetch):
    # Given an authorizer that lets a user read clusters but not change them
    # Then reads and the stream work
    await call(jp_fetch, "GET", "clusters", expect=200)
    await call(jp_fetch, "GET", "templates", expect=200)
    connection = await jp_ws_fetch("clustermgr", "api", "stream")
    assert strict_json(await connection.read_message())["type"] == "snapshot"
    connection.close()
    # And every change is refused
    for method, path, body in EVERY_CALL:
        if method != "GET":
            status, error = await call(jp_fetch, method, *path, body=body)
            assert status == 403 and "not authorized to write" in error["message"], error


def cookie(response, name_prefix):
    """``name=value`` of the cookie a response sets whose name starts with ``name_prefix``."""
    for header in response.headers.get_list("Set-Cookie"):
        pair = header.split(";", 1)[0]
        if pair.startswith(name_prefix):
            return pair
    raise AssertionError(f"no {name_prefix}* cookie in {response.headers.get_list('Set-Cookie')}")


async def browser_cookies(server_url, jp_auth_header):
    """A login cookie (what a browser holds after logging in) and the XSRF cookie's value.

    Jupyter names the login cookie after the host, so ``server_url`` must use the host that the
    requests carrying it will use.
    """
    client = AsyncHTTPClient()
    login = cookie(await client.fetch(server_url + "api/status", headers=jp_auth_header), "username-")
    xsrf = cookie(await client.fetch(server_url + "login"), "_xsrf=")
    return login, xsrf.split("=", 1)[1]


async def test_cookie_authenticated_changes_need_the_xsrf_token(jp_fetch, jp_http_port, jp_base_url, jp_auth_header):
    login, xsrf = await browser_cookies(
        f"http://127.0.0.1:{jp_http_port}{jp_base_url}", jp_auth_header
    )  # jp_fetch's host
    cookie_only = {**NO_TOKEN, "Cookie": login}
    # Given a browser session: reading with the cookie alone works
    await call_as(jp_fetch, cookie_only, "GET", "clusters", expect=200)
    # When it changes something without the XSRF token
    for method, path, body in EVERY_CALL:
        if method != "GET":
            status, error = await call_as(jp_fetch, cookie_only, method, *path, body=body)
            # Then it is refused before anything else is looked at, and nothing changes
            assert status == 403 and error["code"] == "forbidden" and "_xsrf" in error["message"], (method, error)
    _, listing = await call(jp_fetch, "GET", "clusters", expect=200)
    assert listing["clusters"] == []
    # While the same session with the XSRF token gets through to the API (here: a 400 for a bad body)
    with_xsrf = {**NO_TOKEN, "Cookie": f"{login}; _xsrf={xsrf}", "X-XSRFToken": xsrf}
    status, error = await call_as(jp_fetch, with_xsrf, "POST", "clusters", body={"spec": "big"})
    assert status == 400 and error["field"] == "spec", error


async def test_the_stream_refuses_cross_origin_connections(jp_ws_fetch, jp_http_port, jp_base_url, jp_auth_header):
    login, _ = await browser_cookies(
        f"http://localhost:{jp_http_port}{jp_base_url}", jp_auth_header
    )  # jp_ws_fetch's host
    # When a page of another origin opens the stream, with the browser's cookie or even with a token
    for headers in ({**NO_TOKEN, "Cookie": login}, {}):
        status, error = await websocket_refusal(jp_ws_fetch, {**headers, "Origin": "http://evil.example"})
        # Then it is refused
        assert status == 403 and "cross-origin" in error["message"], error
    # While the server's own origin is welcome
    same_origin = {**NO_TOKEN, "Cookie": login, "Origin": f"http://localhost:{jp_http_port}"}
    connection = await jp_ws_fetch("clustermgr", "api", "stream", headers=same_origin)
    assert strict_json(await connection.read_message())["type"] == "snapshot"
    connection.close()
