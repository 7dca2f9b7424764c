#!/usr/bin/env python3
"""The server binary llama-server's pytest suite starts (LLAMA_SERVER_BIN_PATH).

The suite's utils.py launches `LLAMA_SERVER_BIN_PATH` with llama-server's
options; its presets name Hugging Face repositories (`--hf-repo`, which
llama-server downloads). This launcher takes that command line, puts the
project's generated fixture in place of each preset's model, and execs
(same process, so the suite's terminate reaches the server):

  UPSTREAM_SUITE_SERVER=llama    llama-server with `--model FIXTURE` for
                                 `--hf-repo/--hf-file`; every other option
                                 as given.
  UPSTREAM_SUITE_SERVER=specdec  `specdec serve` with llama-server's options
                                 in specdec's names (table below); an option
                                 specdec does not take is passed on as is, so
                                 that specdec refuses it and the test says so.

Environment: UPSTREAM_SUITE_BIN (the binary to exec), UPSTREAM_SUITE_FIXTURES
(the folder of fixtures, names in FIXTURES), UPSTREAM_SUITE_TESTS (the
suite's folder: a relative path that names no file from the working
directory, like the suite's `../../../models/templates/X.jinja`, is taken
from there).
"""

import json
import os
import sys

# Each preset's repository -> the fixture file written for it by
# scripts/upstream-suite.sh. Presets not here (embedding, reranking,
# multimodal and router models) have no fixture: the launcher exits 2.
FIXTURES = {
    "ggml-org/test-model-stories260K": "stories260K.gguf",
    "ggml-org/test-model-stories260K-infill": "stories260K-infill.gguf",
    "ggml-org/stories15M_MOE": "stories15M_MOE.gguf",
}

# llama-server options that take a value (those the suite's utils.py
# writes); any other option is a flag.
WITH_VALUE = {
    "--port", "--temp", "--seed", "--host", "--model", "-m", "--model-url", "--model-draft", "-md", "--hf-repo", "-hf",
    "--hf-file", "-hff", "--models-dir", "--models-max", "--models-preset", "--cors-origins", "--batch-size", "-b",
    "--ubatch-size", "-ub", "--threads", "-t", "--n-gpu-layers", "-ngl", "--pooling", "--alias", "--tags", "--ctx-size",
    "-c", "--parallel", "-np", "-ctk", "-ctv", "-fa", "--n-predict", "-n", "--slot-save-path", "--grp-attn-n",
    "--grp-attn-w", "--lora", "--spec-type", "--api-key", "--spec-draft-n-max", "--spec-draft-n-min", "--spec-synth-len",
    "--spec-synth-rates", "--reasoning-format", "--reasoning", "--chat-template", "--chat-template-file", "--mmproj-url",
    "--media-path", "--sleep-idle-seconds", "--cache-ram", "--tools", "--tools-runtime", "--mcp-servers-config",
    "--mcp-servers-json",
}

# Option spellings normalised before translation.
SHORT = {"-m": "--model", "-md": "--model-draft", "-hf": "--hf-repo", "-hff": "--hf-file", "-b": "--batch-size",
         "-ub": "--ubatch-size", "-t": "--threads", "-ngl": "--n-gpu-layers", "-c": "--ctx-size", "-np": "--parallel",
         "-n": "--n-predict"}

# llama-server option -> specdec serve option, same value.
SAME_VALUE = {
    "--port": "--port", "--host": "--host", "--model": "-m", "--model-draft": "--model-draft",
    "--batch-size": "--batch-size", "--ubatch-size": "--ubatch-size", "--threads": "--threads",
    "--n-gpu-layers": "--n-gpu-layers", "--alias": "--alias", "--parallel": "--parallel", "-ctk": "-ctk",
    "-ctv": "-ctv", "-fa": "-fa", "--api-key": "--api-key", "--reasoning-format": "--reasoning-format",
    "--chat-template": "--chat-template", "--chat-template-file": "--chat-template-file", "--cache-ram": "--cache-ram",
    "--spec-draft-n-min": "--draft-min", "--seed": "--seed",
}

# Dropped for specdec, with why: options that are no-ops there, or server
# defaults for sampling that specdec takes per request only (a request that
# sets them is served as on llama-server).
DROPPED = {
    "--offline": "nothing is downloaded",
    "--cont-batching": "always on",
    "--metrics": "/metrics is always on",
    "--no-ui": "no web UI is bundled",
    "--no-jinja": "templates are always Jinja",
    "--jinja": "templates are always Jinja",
    "--kv-unified": "each slot has its own cache; its size is the whole -c (below)",
    "--temp": "sampling defaults are per request",
    "--n-predict": "no server-wide default for max_tokens",
}

SPEC_TYPES = {"draft-simple": "draft", "draft-mtp": "mtp", "draft-eagle3": "eagle3", "draft-dflash": "dflash",
              "draft-dspark": "dspark"}


def parse(argv):
    """llama-server's argv -> [(option, value or None)] in order."""
    out = []
    i = 0
    while i < len(argv):
        opt = SHORT.get(argv[i], argv[i])
        if argv[i] in WITH_VALUE and i + 1 < len(argv):
            out.append((opt, argv[i + 1]))
            i += 2
        else:
            out.append((opt, None))
            i += 1
    return out


def resolve(path, tests_dir):
    if os.path.isabs(path) or os.path.exists(path) or not tests_dir:
        return path
    candidate = os.path.normpath(os.path.join(tests_dir, path))
    return candidate if os.path.exists(candidate) else path


def fixture_for(repo, fixtures_dir):
    name = FIXTURES.get(repo.split(":")[0])
    if name is None:
        sys.stderr.write(f"launch-server: no fixture stands for {repo} (embedding, reranking, multimodal and router "
                         f"presets are out of scope)\n")
        sys.exit(2)
    return os.path.join(fixtures_dir, name)


def model_options(opts, fixtures_dir):
    """Replaces --hf-repo/--hf-file with --model FIXTURE."""
    out = []
    for opt, val in opts:
        if opt == "--hf-repo":
            out.append(("--model", fixture_for(val, fixtures_dir)))
        elif opt == "--hf-file":
            continue
        else:
            out.append((opt, val))
    return out


def flatten(opts):
    return [x for opt, val in opts for x in ((opt,) if val is None else (opt, val))]


def to_specdec(opts):
    given = dict(opts)
    out = []
    notes = []
    # llama-server's -c is the whole KV cache, split over -np slots unless it
    # is unified (as when -np is not given: 4 slots sharing it); specdec's -c
    # is each slot's.
    n_parallel = int(given.get("--parallel", "-1"))
    unified = "--kv-unified" in given or n_parallel < 0
    if n_parallel < 0:
        out.append(("--parallel", "4"))
    for opt, val in opts:
        if opt in SAME_VALUE:
            out.append((SAME_VALUE[opt], val))
        elif opt == "--ctx-size":
            n = int(val)
            out.append(("--ctx-size", str(n if unified or n == 0 else n // n_parallel)))
        elif opt in DROPPED:
            notes.append(f"{opt}: {DROPPED[opt]}")
        elif opt == "--verbose":
            out.append(("-vv", None))  # llama-server's: every log line, and __verbose in each answer
        elif opt in ("--slots", "--no-slots"):
            out.append((opt, None))
        elif opt == "--spec-draft-n-max":
            # llama-server drafts up to n_max tokens a step, stopping early
            # only below --spec-draft-p-min (default 0): specdec's fixed length.
            out.extend((("--n-draft", val), ("--draft-max", val)))
        elif opt == "--spec-type":
            out.append(("--spec", SPEC_TYPES.get(val, val)))
        elif opt == "--cors-origins":
            out.extend(("--cors-origin", o) for o in val.split(","))
        elif opt == "--reasoning" and val in ("on", "off"):
            out.append(("--chat-template-kwargs", json.dumps({"enable_thinking": val == "on"})))
        elif opt == "--reasoning" and val == "auto":
            notes.append("--reasoning auto: the default")
        else:
            out.append((opt, val))  # not translated: specdec refuses it by name
    return out, notes


def main():
    server = os.environ.get("UPSTREAM_SUITE_SERVER", "llama")
    binary = os.environ["UPSTREAM_SUITE_BIN"]
    fixtures_dir = os.environ["UPSTREAM_SUITE_FIXTURES"]
    tests_dir = os.environ.get("UPSTREAM_SUITE_TESTS")
    opts = model_options(parse(sys.argv[1:]), fixtures_dir)
    opts = [(o, resolve(v, tests_dir) if o in ("--chat-template-file", "--media-path") and v else v) for o, v in opts]
    if server == "llama":
        argv = [binary, *flatten(opts)]
    elif server == "specdec":
        translated, notes = to_specdec(opts)
        argv = [binary, "serve", *flatten(translated)]
        for n in notes:
            sys.stderr.write(f"launch-server: dropped {n}\n")
    else:
        sys.stderr.write(f"launch-server: UPSTREAM_SUITE_SERVER is llama or specdec, not {server}\n")
        sys.exit(2)
    sys.stderr.write("launch-server: " + " ".join(argv) + "\n")
    sys.stderr.flush()
    os.execv(binary, argv)


if __name__ == "__main__":
    main()
