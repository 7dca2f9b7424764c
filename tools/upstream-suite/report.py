#!/usr/bin/env python3
"""Compares two runs of llama-server's pytest suite (JUnit XML) and writes
the per-file table: what llama-server passed on the fixtures, what specdec
passed, what failed on both, and each test that failed on specdec only, with
its reason from scope.tsv (or the failure's first line, marked as not yet
analysed).

  report.py --llama LLAMA.xml --specdec SPECDEC.xml --scope scope.tsv
            [--meta LINE] [--out results.md]

scripts/upstream-suite.sh --record keeps the table as a dated record in docs/results/.
"""

import argparse
import collections
import fnmatch
import re
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    """JUnit XML -> {'file.py::test[param]': ('passed'|'failed'|'skipped', message)}."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")[-1]
        test_id = f"{module}.py::{case.get('name')}"
        state, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
                text = (child.text or "").strip().splitlines()
                message = child.get("message") or (text[-1] if text else "")
                break
            if child.tag == "skipped":
                state = "skipped"
                message = child.get("message") or ""
        out[test_id] = (state, message or "")
    return out


def read_scope(path):
    """scope.tsv: `out-of-scope<TAB>file<TAB>reason` and `reason<TAB>test pattern<TAB>reason` lines."""
    out_of_scope, reasons = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, pattern, text = line.split("\t", 2)
            (out_of_scope if kind == "out-of-scope" else reasons).append((pattern, text))
    return out_of_scope, reasons


def reason_for(test_id, reasons, message):
    for pattern, text in reasons:
        if fnmatch.fnmatchcase(test_id, pattern) or fnmatch.fnmatchcase(test_id, pattern + "[*"):
            return text
    first = re.sub(r"\s+", " ", message)[:160]
    return f"not analysed yet: `{first}`"


def escape(text):
    return text.replace("|", "\\|")


def report(llama, specdec, out_of_scope, reasons, meta):
    files = collections.OrderedDict()
    for test_id in sorted(set(llama) | set(specdec)):
        files.setdefault(test_id.split("::")[0], []).append(test_id)
    rows = []
    only = []
    totals = collections.Counter()
    for name, tests in files.items():
        c = collections.Counter()
        for t in tests:
            a = llama.get(t, ("missing", ""))[0]
            b = specdec.get(t, ("missing", ""))[0]
            c["tests"] += 1
            c["skipped"] += a == "skipped" and b == "skipped"
            c["llama"] += a == "passed"
            c["specdec"] += b == "passed"
            c["both_failed"] += a != "passed" and b != "passed" and not (a == "skipped" and b == "skipped")
            if a == "passed" and b != "passed":
                c["specdec_only"] += 1
                only.append((t, reason_for(t, reasons, specdec.get(t, ("", "not run"))[1])))
            c["llama_only"] += b == "passed" and a != "passed"
        totals.update(c)
        rows.append((name, c))
    lines = []
    if meta:
        lines += [meta, ""]
    lines += [
        "| file | tests | llama-server passed | specdec passed | failed on both | failed on specdec only | failed on llama-server only | skipped on both |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, c in rows + [("**all**", totals)]:
        lines.append(f"| {name} | {c['tests']} | {c['llama']} | {c['specdec']} | {c['both_failed']} | {c['specdec_only']} | "
                     f"{c['llama_only']} | {c['skipped']} |")
    lines += ["", "Failed on specdec only, with the reason:", ""]
    if only:
        lines += [f"- `{escape(t)}`: {r}" for t, r in only]
    else:
        lines.append("- none")
    lines += ["", "Not run (out of scope):", "", "| file | why |", "|---|---|"]
    lines += [f"| {name} | {escape(why)} |" for name, why in out_of_scope]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama", required=True)
    p.add_argument("--specdec", required=True)
    p.add_argument("--scope", required=True)
    p.add_argument("--meta", default="")
    p.add_argument("--out")
    a = p.parse_args()
    out_of_scope, reasons = read_scope(a.scope)
    md = report(outcomes(a.llama), outcomes(a.specdec), out_of_scope, reasons, a.meta)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(md)
    else:
        sys.stdout.write(md)


if __name__ == "__main__":
    main()
