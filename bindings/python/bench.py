"""Python's generate against the C++ CLI's, tokens/s on the same model.

    python3 bindings/python/bench.py TARGET.gguf DRAFT.gguf [--runs N] [--n-predict 256]

Both run one thread, a 4,096-position context, EAGLE-3 drafts of 4 (or the
strategy the files give), the CLI's warm-up first, and count tokens/s the
CLI's way: tokens decoded after the prompt's over the time after the
prefill. Runs alternate (CLI, generate with a streaming callback, the Stream
iterator) so that a busy machine slows all three alike; the medians' ratios
are printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import specdec  # noqa: E402

PROMPT = "abc"


def cli_run(cli: str, target: str, draft: str, n: int) -> float:
    out = subprocess.run(
        [cli, "generate", "-m", target, "--model-draft", draft, "-t", "1", "-c", "4096", "-n", str(n), "-p", PROMPT, "--n-draft", "4"],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(re.search(r"([0-9.]+) tokens/s", out.stderr).group(1))


def python_runs(target: str, draft: str, n: int) -> tuple:
    with specdec.Speculator(target, draft, n_ctx=4096, n_draft_max=4, n_threads=1) as spec:
        spec.session.generate([1], n_predict=3, n_draft=1, ignore_eog=True)  # the CLI's warm-up
        sink = open(os.devnull, "w")
        g = spec.session.generate_batch(
            [spec.tokenize(PROMPT)], n_predict=n, n_draft=4, on_piece=lambda s, t, p: sink.write(p.decode("utf-8", "replace")) and None
        )
        c = g[0]
        generate_tps = (c.stats.n_generated - 1) * 1e6 / (g.times.t_total_us - g.times.t_prefill_us)
        t0, count = None, 0
        for piece in spec.stream(PROMPT, n_predict=n, n_draft=4):
            if t0 is None:
                t0 = time.perf_counter()  # after the prompt's token
            sink.write(piece.text)
            count += 1
        stream_tps = (count - 1) / (time.perf_counter() - t0)
    return generate_tps, stream_tps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n-predict", type=int, default=256)
    ap.add_argument("--cli", default=str(HERE.parents[1] / "build" / "bin" / "specdec"))
    a = ap.parse_args()
    cli, gen, stream = [], [], []
    for _ in range(a.runs):
        cli.append(cli_run(a.cli, a.target, a.draft, a.n_predict))
        g, s = python_runs(a.target, a.draft, a.n_predict)
        gen.append(g)
        stream.append(s)
    m = statistics.median(cli)
    print(
        json.dumps(
            {
                "cli_tokens_per_second": cli,
                "generate_tokens_per_second": gen,
                "stream_tokens_per_second": stream,
                "generate_over_cli": statistics.median(gen) / m,
                "stream_over_cli": statistics.median(stream) / m,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
