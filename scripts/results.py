#!/usr/bin/env python3
"""Measurement records (docs/results/) and the numbers README.md quotes from them.

  results.py record --name NAME --command CMD --markdown FILE [--json FILE] [--asset FILE]...
                    [--what TEXT] [--host NAME] [--date YYYY-MM-DD] [--cpuinfo FILE] [--root DIR] [--force]
      Writes docs/results/DATE-HOST-NAME.md: the date (UTC), the CPU (model name,
      CPUs, AVX512F and AMX, from /proc/cpuinfo), the commit (git describe), the
      command, the run's Markdown, and an empty "Conclusions" heading. The run's
      JSON goes beside it as DATE-HOST-NAME.json, each asset as DATE-HOST-NAME-BASENAME.
      The record's row is added to docs/results/README.md. Prints the record's path.
  results.py readme [--check] [--root DIR]
      Reads docs/results/latest.json, takes each value from the run it names
      (a JSON file and the entry in it, or a line of a record), and writes the
      text between README.md's <!-- results:begin NAME --> and <!-- results:end -->
      markers. --check writes nothing and exits 1 where latest.json or README.md
      differ from what it would write.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INDEX_END = "<!-- results index end -->"
BLOCK = re.compile(r"<!-- results:begin ([a-z0-9-]+) -->(.*?)<!-- results:end -->", re.S)
PLACEHOLDER = re.compile(r"\{([a-z0-9-]+)(?:\.(host))?\}")
FAMILIES = {"xeon": "Intel Xeon", "epyc": "AMD EPYC", "ryzen": "AMD Ryzen", "threadripper": "AMD Threadripper",
            "core": "Intel Core"}


# --- the host ----------------------------------------------------------------------------
def cpu(cpuinfo):
    """The CPU as /proc/cpuinfo names it: model, processors, AVX512F, AMX."""
    text = Path(cpuinfo).read_text(errors="replace") if Path(cpuinfo).exists() else ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    flags = set(flags.group(1).split()) if flags else set()
    return {"model": model.group(1).strip() if model else "unknown CPU",
            "cpus": len(re.findall(r"^processor\s*:", text, re.M)) or os.cpu_count() or 0,
            "avx512f": "avx512f" in flags,
            "amx": bool(flags & {"amx_tile", "amx_bf16", "amx_int8"})}


def host_name(model):
    """A short name for file names: the CPU family, else the model's first word."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"\((r|tm)\)", " ", model.lower()))
    for w in words:
        if w in FAMILIES:
            return w
    words = [w for w in words if w not in ("intel", "amd", "genuine", "cpu", "processor")]
    return words[0] if words else "unknown"


def commit(root):
    def git(*args):
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""
    described = git("describe", "--always", "--tags", "--dirty")
    short = git("rev-parse", "--short", "HEAD")
    if not short:
        return "unknown (not a git checkout)"
    return described if described.startswith(short) else f"{described} ({short})"


# --- record ------------------------------------------------------------------------------
def demote(markdown, levels=2):
    """The run's own headings, below the record's."""
    out, fence = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out).strip("\n")


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def record(a):
    root = Path(a.root)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", a.name):
        sys.exit(f"results: --name {a.name!r}: lower-case letters, digits and '-' only")
    c = cpu(a.cpuinfo)
    host = a.host or host_name(c["model"])
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", host):
        sys.exit(f"results: --host {host!r}: lower-case letters, digits and '-' only")
    date = a.date or datetime.now(timezone.utc).strftime("%Y-%m-%d")
    results = root / "docs" / "results"
    stem = f"{date}-{host}-{a.name}"
    md_path = results / f"{stem}.md"
    if md_path.exists() and not a.force:
        sys.exit(f"results: {md_path} exists (records are history; another --name, or --force)")
    results.mkdir(parents=True, exist_ok=True)
    raw = []
    if a.json:
        shutil.copyfile(a.json, results / f"{stem}.json")
        raw.append(f"[{stem}.json]({stem}.json)")
    for asset in a.asset:
        name = f"{stem}-{Path(asset).name}"
        shutil.copyfile(asset, results / name)
        raw.append(f"[{name}]({name})")
    family = FAMILIES.get(host, c["model"])
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    rows = [("date", f"{date} (UTC)"),
            ("host", cell(f"{c['model']}, {c['cpus']} CPUs; AVX512F {yes(c['avx512f'])}, AMX {yes(c['amx'])}")),
            ("commit", cell(commit(root))),
            ("command", f"`{cell(a.command)}`"),
            ("raw output", ", ".join(raw) or "none kept")]
    text = [f"# {date}, {family}: {a.what or a.name}", "", "| | |", "|---|---|"]
    text += [f"| {k} | {v} |" for k, v in rows]
    text += ["", "## Output", "", demote(Path(a.markdown).read_text()), "",
             "## Conclusions", "", "<!-- What this run shows, against which targets: written by hand. -->", ""]
    md_path.write_text("\n".join(text))
    index = results / "README.md"
    if index.exists() and INDEX_END in index.read_text():
        row = f"| {date} | {cell(family)} | {cell(a.what or a.name)} | [{stem}.md]({stem}.md) |\n"
        t = index.read_text()
        if f"]({stem}.md)" not in t:
            index.write_text(t.replace(INDEX_END, row + INDEX_END, 1))
    print(md_path)


# --- README's numbers ----------------------------------------------------------------------
def source_value(root, name, entry):
    """The value as the run gives it, formatted as latest.json keeps it."""
    src = entry["source"]
    if "record_line" in src:
        path = root / "docs" / "results" / entry["record"]
        if src["record_line"] not in path.read_text().splitlines():
            raise ValueError(f"{name}: {path.relative_to(root)} has no line {src['record_line']!r}")
        if entry["value"] not in src["record_line"]:
            raise ValueError(f"{name}: {entry['value']} is not in its record's line {src['record_line']!r}")
        return entry["value"]
    data = json.loads((root / src["file"]).read_text())
    rows = [r for r in data[src["list"]] if all(r.get(k) == v for k, v in src["match"].items())]
    if len(rows) != 1:
        raise ValueError(f"{name}: {len(rows)} entries of {src['file']} match {src['match']}")
    return f"{rows[0][src['field']]:.{src.get('digits', 2)}f}"


def render(template, values, name):
    def fill(m):
        key, part = m.group(1), m.group(2)
        if key not in values:
            raise ValueError(f"README block {name}: no value {key} in latest.json")
        return values[key]["host"] if part == "host" else values[key]["value"]
    return PLACEHOLDER.sub(fill, template)


def readme(a):
    root = Path(a.root)
    latest_path = root / "docs" / "results" / "latest.json"
    latest = json.loads(latest_path.read_text())
    problems, hard = [], []  # hard: what writing cannot mend
    for name, entry in latest["values"].items():
        if not (root / "docs" / "results" / entry["record"]).exists():
            hard.append(f"latest.json: {name} names the record {entry['record']}, which does not exist")
        try:
            v = source_value(root, name, entry)
        except (OSError, KeyError, ValueError) as e:
            hard.append(f"latest.json: {e}")
            continue
        if v != entry["value"]:
            problems.append(f"latest.json: {name} is {entry['value']}, its run says {v}")
            entry["value"] = v
    readme_path = root / "README.md"
    text = readme_path.read_text()
    found = set()

    def block(m):
        name = m.group(1)
        found.add(name)
        if name not in latest["readme"]:
            hard.append(f"README.md: block {name} has no text in latest.json")
            return m.group(0)
        try:
            body = render(latest["readme"][name], latest["values"], name)
        except ValueError as e:
            hard.append(str(e))
            return m.group(0)
        if body != m.group(2):
            problems.append(f"README.md: block {name} reads {m.group(2)!r}; latest.json gives {body!r}")
        return f"<!-- results:begin {name} -->{body}<!-- results:end -->"
    new = BLOCK.sub(block, text)
    for name in sorted(set(latest["readme"]) - found):
        hard.append(f"README.md: no block {name} (<!-- results:begin {name} --> ... <!-- results:end -->)")
    if a.check or hard:
        for p in hard + (problems if a.check else []):
            print(p)
        n = len(hard) + (len(problems) if a.check else 0)
        print(f"results: {len(found)} README blocks, {len(latest['values'])} values checked; {n} differ")
        return 1 if n else 0
    latest_path.write_text(json.dumps(latest, indent=2, ensure_ascii=False) + "\n")
    readme_path.write_text(new)
    print(f"results: wrote {len(found)} README blocks from {latest_path.relative_to(root)}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--name", required=True)
    r.add_argument("--command", required=True)
    r.add_argument("--markdown", required=True)
    r.add_argument("--json")
    r.add_argument("--asset", action="append", default=[])
    r.add_argument("--what")
    r.add_argument("--host")
    r.add_argument("--date")
    r.add_argument("--cpuinfo", default="/proc/cpuinfo")
    r.add_argument("--root", default=str(ROOT))
    r.add_argument("--force", action="store_true")
    m = sub.add_parser("readme")
    m.add_argument("--check", action="store_true")
    m.add_argument("--root", default=str(ROOT))
    a = p.parse_args()
    if a.cmd == "record":
        record(a)
        return 0
    return readme(a)


if __name__ == "__main__":
    sys.exit(main())
