"""Generated fixtures for the binding's tests.

The models come from the build's specdec-fixture tool (the same
constructions the C++ tests use: a controlled target whose greedy next token
is t + 1 in a cycle, and drafters that err on every 4th token id, so drafts
are both accepted and rejected). They are written once into
$SPECDEC_FIXTURE_DIR (default: BUILD/fixtures/python), atomically, so
concurrent test processes share them.

Environment: SPECDEC_BUILD_DIR (default: the checkout's build/), or
SPECDEC_FIXTURE_TOOL for the tool itself.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
BUILD = pathlib.Path(os.environ.get("SPECDEC_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(HERE.parent))  # the package from this checkout, installed or not

import specdec  # noqa: E402

# name: specdec-fixture arguments
FIXTURES = {
    "llama": ["llama"],
    "llama-v16": ["llama", "--n-vocab", "16"],
    # Q1_0: written by llama.cpp's quantizer, not covered by exact kernels.
    "llama-q1_0": ["llama", "--type", "q1_0"],
    "llama-w128": ["llama", "--n-embd", "128"],
    "eagle3": ["eagle3", "--drafter", "wrong"],
    "eagle3-w128": ["eagle3", "--drafter", "wrong", "--n-embd", "128"],
    "dflash": ["dflash", "--drafter", "wrong"],
    "dflash2": ["dflash2", "--drafter", "wrong"],
    "draft": ["llama-draft", "--drafter", "wrong"],
    "qwen35-mtp": ["qwen35-mtp", "--drafter", "wrong"],
    "glm4moe-mtp": ["glm4moe-mtp", "--drafter", "wrong"],
    # Soft fixtures (speculative sampling): after t the target draws t's
    # successors 1, 2, 3 with probabilities SOFT_TARGET, the MTP head drafts
    # them with SOFT_DRAFTER (the C++ tier's test-speculative-sampling pair).
    "qwen35-mtp-soft": ["qwen35-mtp", "--soft-target", "0.5,0.25,0.25", "--soft-drafter", "0.7,0.05,0.25"],
    "glm4moe-mtp-soft": ["glm4moe-mtp", "--soft-target", "0.5,0.25,0.25", "--soft-drafter", "0.7,0.05,0.25"],
}
SOFT_TARGET = (0.5, 0.25, 0.25)
SOFT_DRAFTER = (0.7, 0.05, 0.25)


def _tool() -> str:
    tool = os.environ.get("SPECDEC_FIXTURE_TOOL", str(BUILD / "bin" / "specdec-fixture"))
    if not os.path.exists(tool):
        pytest.exit(f"specdec-fixture not found at {tool} (build the project, or set SPECDEC_BUILD_DIR)", 2)
    return tool


def fixture_path(name: str) -> str:
    directory = pathlib.Path(os.environ.get("SPECDEC_FIXTURE_DIR", BUILD / "fixtures" / "python"))
    path = directory / f"{name}.gguf"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f"{name}.tmp.{os.getpid()}.gguf"
        args = FIXTURES[name]
        subprocess.run([_tool(), args[0], str(tmp), *args[1:]], check=True, capture_output=True)
        os.replace(tmp, path)
    return str(path)


@pytest.fixture(scope="session")
def fixtures():
    return fixture_path


# Each prompt ends one before a multiple of 4, so the first draft errs.
PROMPTS = [[19, 20, 21, 22, 23], [90, 6, 7], [50, 51, 59, 60, 61, 62, 63]]


def glitched_cycle_prompt(extra: int, tail: int, n_vocab: int = 16) -> list:
    """The 16-token target's cycle (3..15) with an extra token after each
    period, so n-gram lookups meet both right and wrong continuations."""
    out = []
    for _ in range(5):
        out += list(range(3, n_vocab)) + [extra]
    return out + [3 + i for i in range(tail)]


NGRAM_PROMPTS = [glitched_cycle_prompt(9, 5), glitched_cycle_prompt(12, 8), glitched_cycle_prompt(4, 2)]


def successor(t: int, n_vocab: int = 128) -> int:
    """The controlled targets' greedy next token (fixtures.h)."""
    active = min(n_vocab, 128)
    if t < 3 or t >= active:
        return 3
    return 3 if t + 1 >= active else t + 1


def expected_cycle(last: int, n: int, n_vocab: int = 128) -> list:
    out = []
    for _ in range(n):
        last = successor(last, n_vocab)
        out.append(last)
    return out


# strategy case: (strategy, target fixture, draft fixture or None, prompts, vocabulary)
CASES = {
    "mtp-qwen35": ("mtp", "qwen35-mtp", None, PROMPTS, 128),
    "mtp-glm4moe": ("mtp", "glm4moe-mtp", None, PROMPTS, 128),
    "eagle3": ("eagle3", "llama", "eagle3", PROMPTS, 128),
    "dflash": ("dflash", "llama", "dflash", PROMPTS, 128),
    "dflash2": ("dflash", "llama", "dflash2", PROMPTS, 128),
    "draft": ("draft", "llama", "draft", PROMPTS, 128),
    "ngram-simple": ("ngram-simple", "llama-v16", None, NGRAM_PROMPTS, 16),
    "ngram-map-k": ("ngram-map-k", "llama-v16", None, NGRAM_PROMPTS, 16),
    "ngram-map-k4v": ("ngram-map-k4v", "llama-v16", None, NGRAM_PROMPTS, 16),
    "ngram-mod": ("ngram-mod", "llama-v16", None, NGRAM_PROMPTS, 16),
    "ngram-cache": ("ngram-cache", "llama-v16", None, NGRAM_PROMPTS, 16),
}

# Cases on the soft fixtures: sampled output varies, so they are kept out of
# the greedy sweeps over CASES (there every soft draft is kept).
SOFT_PROMPTS = [[20], [40], [60], [80], [30], [50], [70], [90]]
SOFT_CASES = {
    "mtp-qwen35-soft": ("mtp", "qwen35-mtp-soft", None, SOFT_PROMPTS, 128),
    "mtp-glm4moe-soft": ("mtp", "glm4moe-mtp-soft", None, SOFT_PROMPTS, 128),
}


class Opened:
    """Models, a target context and a session for one case; closed at the end."""

    def __init__(self, case: str, *, n_seq: int = 1, n_draft_max: int = 4, n_ctx: int = 512):
        strategy, target, draft, self.prompts, self.n_vocab = {**CASES, **SOFT_CASES}[case]
        self.strategy = specdec.Strategy.parse(strategy)
        mtp = self.strategy == specdec.Strategy.MTP
        self.model = specdec.Model(fixture_path(target), load_mtp=mtp)
        self.draft_model = specdec.Model(fixture_path(draft)) if draft else None
        self.context = specdec.Context(
            self.model, n_ctx=n_ctx, n_seq=n_seq, n_threads=1, n_rs_seq=n_draft_max if self.model.is_recurrent else 0
        )
        self.session = specdec.Session.create(
            self.context, self.draft_model, strategy=self.strategy, n_draft_max=n_draft_max, n_threads=1
        )

    def plain(self, n_seq: int = 1, **kwargs) -> specdec.Generation:
        with specdec.Model(self.model.path) as m, specdec.Context(m, n_ctx=512 * n_seq, n_seq=n_seq, n_threads=1) as ctx:
            return ctx.generate_batch(self.prompts[:n_seq], **kwargs)

    def close(self) -> None:
        self.session.close()
        self.context.close()
        self.model.close()
        if self.draft_model:
            self.draft_model.close()


@pytest.fixture
def opened():
    made = []

    def make(case: str, **kwargs) -> Opened:
        o = Opened(case, **kwargs)
        made.append(o)
        return o

    yield make
    for o in made:
        o.close()
