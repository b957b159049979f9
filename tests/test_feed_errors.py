"""The push feed answers a request it cannot serve with a JSON error, like every other clustermgr route."""

from __future__ import annotations

import pytest
from tornado.httpclient import HTTPClientError

from .helpers import strict_json, validate_schema


async def refusal(jp_fetch, headers: dict) -> tuple[int, str, dict]:
    """GET the stream as plain HTTP; return the refusal's status, content type and JSON body."""
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("clustermgr", "api", "stream", headers=headers)
    response = refused.value.response
    error = strict_json(response.body)
    validate_schema(error, "components", "schemas", "Error", what=f"stream refusal {refused.value.code}")
    return refused.value.code, response.headers.get("Content-Type", ""), error


async def test_a_plain_get_of_the_stream_is_a_json_400(jp_fetch, jp_auth_header):
    # Given an authenticated client
    # When it GETs the stream without asking for a WebSocket upgrade
    status, content_type, error = await refusal(jp_fetch, dict(jp_auth_header))
    # Then the answer is a JSON 400 saying what is missing, not tornado's plain text
    assert status == 400
    assert content_type.startswith("application/json")
    assert error["code"] == "invalid"
    assert "WebSocket" in error["message"]


async def test_an_upgrade_without_a_connection_header_is_a_json_400(jp_fetch, jp_auth_header):
    # Given an authenticated client that asks for an upgrade but says no "Connection: Upgrade"
    headers = {**jp_auth_header, "Upgrade": "websocket", "Connection": "keep-alive"}
    # When it GETs the stream
    status, content_type, error = await refusal(jp_fetch, headers)
    # Then the answer is a JSON 400 too
    assert status == 400
    assert content_type.startswith("application/json")
    assert "Connection" in error["message"]


async def test_an_anonymous_get_of_the_stream_is_a_json_403(jp_fetch):
    # Given a client with no token
    # When it GETs the stream
    status, content_type, error = await refusal(jp_fetch, {"Authorization": ""})
    # Then the answer is a JSON 403 that says how to authenticate
    assert status == 403
    assert content_type.startswith("application/json")
    assert error["code"] == "forbidden"
