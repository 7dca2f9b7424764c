#!/usr/bin/env python3
"""Every option of every command and every route of the server is documented.

Options are read from `specdec COMMAND --help` (long names and llama.cpp's
short spellings such as -ngl, which the help text names); each must appear
in docs/cli.md as `--name` or `-x`. Routes are read from the server's
sources (every `route == "/..."` comparison, and the routes of
serve-routes.cpp's dispatch); each must appear in docs/server.md. README.md stays at most 200 lines.
Usage: documented.py SPECDEC_BINARY REPOSITORY_ROOT
"""
import re
import subprocess
import sys
from pathlib import Path


def help_text(binary, *args):
    return subprocess.run([binary, *args, "--help"], check=True, capture_output=True, text=True).stdout


def commands(binary):
    text = help_text(binary)
    block = text.split("Subcommands:", 1)[1]
    return re.findall(r"^\s{2}([a-z][a-z-]*)\s", block, re.M)


def options(text):
    names = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    # llama.cpp's multi-letter short spellings, named at the start of a description ("-ngl: ...").
    names |= set(re.findall(r"^\s+(-[a-z]{2,5}):", text, re.M))
    names |= set(re.findall(r"^\s+(-[a-zA-Z]),--", text, re.M))
    return names - {"--help"}


def routes(root):
    out = set()
    for src in (root / "tools/specdec/serve").glob("*.cpp"):
        out |= set(re.findall(r'route == "(/[a-z0-9/_-]+)"', src.read_text()))
    return out


def main():
    binary, root = sys.argv[1], Path(sys.argv[2])
    cli_doc = (root / "docs/cli.md").read_text()
    server_doc = (root / "docs/server.md").read_text()
    missing = []
    for cmd in commands(binary):
        for name in sorted(options(help_text(binary, cmd))):
            if f"`{name}" not in cli_doc and f", `{name}" not in cli_doc:
                missing.append(f"docs/cli.md lacks {cmd} {name}")
    found = routes(root)
    if not found:
        missing.append("no route found in tools/specdec/serve/*.cpp: the pattern is out of date")
    for route in sorted(found):
        if route not in server_doc:
            missing.append(f"docs/server.md lacks the route {route}")
    n_readme = len((root / "README.md").read_text().splitlines())
    if n_readme > 200:
        missing.append(f"README.md has {n_readme} lines; the front door stays within 200 (reference material goes to docs/)")
    for m in missing:
        print(m)
    print(f"documented: {len(commands(binary))} commands, {len(found)} routes checked; {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
