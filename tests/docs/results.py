#!/usr/bin/env python3
"""The measurement records and the numbers README.md quotes from them agree.

- README.md's <!-- results:begin NAME --> blocks are what `scripts/results.py
  readme` writes from docs/results/latest.json, and each value there is what
  its run gives (its JSON entry, or a line of its record).
- Every record in docs/results/ is in the index, and every link of the
  index resolves.
- Every relative link in README.md, patches/README.md and docs/ names a file
  that exists and, into a Markdown file, a heading it has.
- The record writer, on a made-up CPU in a scratch folder: the file name, the
  header (CPU, AVX512F, AMX), the index row, and a second run refused; the
  checker, on a made-up run: a value that drifted from its run is reported.
Usage: results.py REPOSITORY_ROOT
"""
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    out, seen, fence = set(), {}, False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"#{1,6} (.*)", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def broken_links(root):
    files = [root / "README.md", root / "patches/README.md", *sorted((root / "docs").rglob("*.md"))]
    out, cache = [], {}
    for f in files:
        text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"(https?:|mailto:)", target):
                continue
            path, _, frag = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                out.append(f"{f.relative_to(root)}: {target}: no such file")
            elif frag and dest.suffix == ".md" and frag not in cache.setdefault(dest, anchors(dest)):
                out.append(f"{f.relative_to(root)}: {target}: no such heading")
    return out


def unindexed(root):
    results = root / "docs/results"
    index = (results / "README.md").read_text()
    linked = set(re.findall(r"\]\(([^)#\s]+\.md)\)", index))
    records = {p.name for p in results.glob("*.md")} - {"README.md"}
    return [f"docs/results/README.md does not list {r}" for r in sorted(records - linked)]


def run(*args):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True)


def writer_and_checker(root):
    """The writer and the checker on made-up inputs."""
    tool = root / "scripts/results.py"
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "docs/results").mkdir(parents=True)
        shutil.copyfile(root / "docs/results/README.md", tmp / "docs/results/README.md")
        cpuinfo = tmp / "cpuinfo"
        cpuinfo.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
                           "flags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n\nprocessor\t: 1\n")
        report = tmp / "bench.md"
        report.write_text("# specdec bench\n\n| configuration | speedup |\n|---|---|\n| mtp n=8 | 1.50 |\n")
        (tmp / "bench.json").write_text(json.dumps({"results": [{"configuration": "mtp n=8", "speedup": 1.5}]}))
        args = [tool, "record", "--root", tmp, "--cpuinfo", cpuinfo, "--date", "2000-01-01", "--name", "smoke",
                "--command", "specdec bench --fixture exact", "--markdown", report, "--json", tmp / "bench.json"]
        r = run(*args)
        record = tmp / "docs/results/2000-01-01-xeon-smoke.md"
        if r.returncode != 0 or not record.exists():
            return [f"record: exit {r.returncode}, {r.stdout}{r.stderr}"]
        text = record.read_text()
        for want in ("| host | Intel(R) Xeon(R) Platinum 8480+, 2 CPUs; AVX512F yes, AMX yes |",
                     "| command | `specdec bench --fixture exact` |", "### specdec bench", "## Conclusions"):
            if want not in text:
                problems.append(f"record: no {want!r} in\n{text}")
        if "](2000-01-01-xeon-smoke.md)" not in (tmp / "docs/results/README.md").read_text():
            problems.append("record: no index row")
        if not (tmp / "docs/results/2000-01-01-xeon-smoke.json").exists():
            problems.append("record: the JSON is not beside it")
        if run(*args).returncode == 0:
            problems.append("record: a second run with the same name overwrote the record")
        # The checker: a value that drifted from its run is reported; written, it agrees again.
        (tmp / "README.md").write_text("Decoded <!-- results:begin x -->1.40× on a Xeon<!-- results:end -->.\n")
        (tmp / "docs/results/latest.json").write_text(json.dumps({
            "values": {"v": {"value": "1.40", "host": "Xeon", "record": "2000-01-01-xeon-smoke.md",
                             "source": {"file": "bench.json", "list": "results",
                                        "match": {"configuration": "mtp n=8"}, "field": "speedup"}}},
            "readme": {"x": "{v}× on a {v.host}"}}))
        if run(tool, "readme", "--check", "--root", tmp).returncode == 0:
            problems.append("readme --check: took 1.40 where the run says 1.50")
        run(tool, "readme", "--root", tmp)
        r = run(tool, "readme", "--check", "--root", tmp)
        if r.returncode != 0 or "1.50× on a Xeon" not in (tmp / "README.md").read_text():
            problems.append(f"readme: did not write the run's 1.50: {r.stdout}")
    return problems


def main():
    root = Path(sys.argv[1]).resolve()
    r = run(root / "scripts/results.py", "readme", "--check", "--root", root)
    problems = [] if r.returncode == 0 else [r.stdout.strip() or r.stderr.strip()]
    problems += unindexed(root) + broken_links(root) + writer_and_checker(root)
    for p in problems:
        print(p)
    print(f"results: README blocks, records' index, links and the record writer checked; "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
