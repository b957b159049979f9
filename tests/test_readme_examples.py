"""Given the README's "Use from scripts" section, when each bash and python example runs against a server, it succeeds."""

import os
import re
import sys
from pathlib import Path

from .helpers import REPO, console_script, run, subprocess_env

HEADING = "## Use from scripts"
EXAMPLE = re.compile(r"^```(bash|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def section_of(source: Path) -> str:
    """The text of the "Use from scripts" section of ``source`` ("" when it has none)."""
    lines = source.read_text().splitlines(keepends=True) if source.exists() else []
    start = next((i for i, line in enumerate(lines) if line.rstrip() == HEADING), None)
    if start is None:
        return ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[start:end])


def section() -> tuple[Path, str]:
    """README.md and the text of its "Use from scripts" section."""
    readme = REPO / "README.md"
    return readme, section_of(readme)


def test_the_section_has_examples_of_each_kind():
    _, text = section()
    assert {language for language, _ in EXAMPLE.findall(text)} == {"bash", "python"}
    for name in ("curl", "clustermgr_lab.client", "clustermgr ", "get_client"):
        assert name in text


async def test_every_example_runs(jp_serverapp, jp_fetch, tmp_path, subtests):
    source, text = section()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    console_script("clustermgr", bin_dir)  # as `pip install` puts it on the PATH
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    env = subprocess_env(
        JUPYTER_URL=jp_serverapp.connection_url, JUPYTER_TOKEN=jp_serverapp.identity_provider.token, PATH=path
    )
    for number, (language, code) in enumerate(EXAMPLE.findall(text), start=1):
        with subtests.test(example=number, language=language, first_line=code.splitlines()[0]):
            command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
            status, out, err = await run(*command, env=env, timeout=300)
            where = f"{source.name}, example {number} ({language})"
            assert status == 0, f"{where} exited {status}\n{code}\n--- stdout\n{out}\n--- stderr\n{err}"
