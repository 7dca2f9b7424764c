#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs a
# consumer project against it. Usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"; src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
