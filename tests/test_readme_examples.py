"""Given the README's "Quick start", docs/api.md's "Use from scripts" and docs/notebook.md's first example, when
each bash and python example runs against a server, it succeeds."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

from .helpers import REPO, console_script, run, subprocess_env

EXAMPLE = re.compile(r"^```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Where examples live: (file, section heading, names its examples must use between them).
SECTIONS = {
    "quick-start": (REPO / "README.md", "## Quick start", ("curl", "clustermgr_lab.get_cluster")),
    "scripts": (REPO / "docs" / "api.md", "## Use from scripts", ("curl", "clustermgr_lab.client", "clustermgr ", "get_client")),
    "notebook": (REPO / "docs" / "notebook.md", "# From a notebook", ("new_cluster", "Client(cluster)", "shutdown()")),
}  # fmt: skip
#: The languages of each section's examples (bash and python unless said here).
LANGUAGES = {"notebook": {"python"}}
#: What the quick start's reader has done in the sidebar before its examples: New Cluster, as the API sees it.
SIDEBAR_CLUSTER = {"name": "Cluster 1", "spec": {"groups": [{"count": 1, "threads": 1, "memory": "1 GiB"}]}}


def section_of(source: Path, heading: str) -> str:
    """The text of the section of ``source`` under ``heading`` ("" when it has none)."""
    lines = source.read_text().splitlines(keepends=True) if source.exists() else []
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end])


def test_section_of_finds_a_section_and_nothing_else(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A\n\n```bash\necho a\n```\n\n## B\n\ntext\n")
    assert EXAMPLE.findall(section_of(page, "## A")) == [("bash", "echo a\n")]
    assert section_of(page, "## C") == ""
    assert section_of(tmp_path / "missing.md", "## A") == ""


@pytest.mark.parametrize("key", SECTIONS)
def test_the_section_has_examples_of_each_kind(key):
    source, heading, names = SECTIONS[key]
    text = section_of(source, heading)
    languages = LANGUAGES.get(key, {"bash", "python"})
    assert {language for language, _ in EXAMPLE.findall(text)} == languages, f"{source.name}: {heading}"
    for name in names:
        assert name in text, f"{source.name}, {heading}: no example uses {name!r}"


@pytest.mark.parametrize("key", SECTIONS)
async def test_every_example_runs(key, jp_serverapp, jp_fetch, tmp_path, subtests):
    source, heading, _ = SECTIONS[key]
    text = section_of(source, heading)
    if key == "quick-start":
        await jp_fetch("clustermgr", "api", "clusters", method="POST", body=json.dumps(SIDEBAR_CLUSTER))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    console_script("clustermgr", bin_dir)  # as `pip install` puts it on the PATH
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = subprocess_env(
        JUPYTER_URL=jp_serverapp.connection_url, JUPYTER_TOKEN=jp_serverapp.identity_provider.token, PATH=path
    )
    examples = EXAMPLE.findall(text)
    assert examples, f"{source.name} has no examples under {heading!r}"
    for number, (language, code) in enumerate(examples, start=1):
        with subtests.test(example=number, language=language, first_line=code.splitlines()[0]):
            command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
            status, out, err = await run(*command, env=env, timeout=300)
            where = f"{source.name}, {heading}, example {number} ({language})"
            assert status == 0, f"{where} exited {status}\n{code}\n--- stdout\n{out}\n--- stderr\n{err}"
