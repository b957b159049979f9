"""The limits the sidebar's editors warn about, as the templates answer gives them."""

from __future__ import annotations

import os

from .helpers import call


async def test_the_templates_answer_says_the_worker_limit_and_the_machine_size(jp_fetch):
    # Given a server configured with max_workers = 12 (conftest)
    # When a client asks for the templates
    _, data = await call(jp_fetch, "GET", "templates", expect=200)
    # Then the answer carries the per-cluster worker limit and this machine's cores and memory
    limits = data["limits"]
    assert limits["max_workers"] == 12
    assert limits["max_clusters"] >= 1
    assert 1 <= limits["machine"]["cores"] <= os.cpu_count()
    assert limits["machine"]["memory"] > 2**20
