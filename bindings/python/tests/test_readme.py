"""The READMEs' Python examples run as written, on fixtures named as they name
their models (target.gguf: the llama fixture, eagle3.gguf: its EAGLE-3 draft)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import HERE, REPO, fixture_path

READMES = [REPO / "README.md", HERE.parent / "README.md"]


def python_examples(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(REPO)))
def test_readme_examples_run(readme, tmp_path):
    examples = python_examples(readme)
    assert examples, f"{readme} has no Python example"
    os.symlink(fixture_path("llama"), tmp_path / "target.gguf")
    os.symlink(fixture_path("eagle3"), tmp_path / "eagle3.gguf")
    env = dict(os.environ, PYTHONPATH=str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for code in examples:
        # One CPU: the example's contexts take every available CPU, and on a
        # shared machine llama.cpp's spinning threads on busy cores make a
        # 0.05 s run take seconds.
        cpu = min(os.sched_getaffinity(0))
        run = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip(), "the example printed nothing"
