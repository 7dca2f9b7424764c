#!/usr/bin/env bash
# llama.cpp's RPC backend end to end: two ggml-rpc-server processes on
# 127.0.0.1 (ports chosen now) hold the target's layers; greedy output must
# equal the local run's for plain decoding, MTP and a draft-model pair, a
# wrong address must fail at load with a message, and a server killed
# mid-generation must end the run with exit 1, a message and the text so
# far, within a bounded time. The servers are stopped on every exit path.
# Usage: test-rpc.sh SPECDEC FIXTURE_TOOL RPC_SERVER
set -u
export OMP_WAIT_POLICY=PASSIVE
# Under the sanitizers: llama.cpp's registry of RPC servers lives until exit.
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
specdec="$1"
fixture="$2"
rpc_server="$3"
work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0
check() { # check NAME CONDITION...
    local name="$1"; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name" >&2; fi
}
contains() { grep -q -- "$2" "$1" || { echo "'$2' not in $1:" >&2; tail -n 20 "$1" >&2; return 1; }; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_server() { # start_server PORT: starts one server, waits until it listens
    "$rpc_server" -H 127.0.0.1 -p "$1" -t 1 >"$work/server-$1.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "ggml-rpc-server on port $1 did not start:" >&2; cat "$work/server-$1.log" >&2
    return 1
}

"$fixture" glm4moe-mtp "$work/glm.gguf"
"$fixture" llama "$work/llama.gguf"
port_a=$(free_port)
port_b=$(free_port)
start_server "$port_a" || exit 1
start_server "$port_b" || exit 1
rpc="127.0.0.1:$port_a,127.0.0.1:$port_b"

# The same text locally and with every layer on the two servers.
same_text() { # same_text NAME GENERATE-ARGS...
    local name="$1"; shift
    "$specdec" generate "$@" -n 48 >"$work/$name-local.txt" 2>"$work/$name-local.err" || { cat "$work/$name-local.err" >&2; return 1; }
    "$specdec" generate "$@" -n 48 --rpc "$rpc" -ngl 99 -vv >"$work/$name-rpc.txt" 2>"$work/$name-rpc.err" \
        || { tail -n 20 "$work/$name-rpc.err" >&2; return 1; }
    grep -q "offloaded .* layers to GPU" "$work/$name-rpc.err" || { echo "$name: nothing offloaded" >&2; return 1; }
    [ -s "$work/$name-local.txt" ] && cmp -s "$work/$name-local.txt" "$work/$name-rpc.txt" \
        || { echo "$name: texts differ" >&2; diff "$work/$name-local.txt" "$work/$name-rpc.txt" >&2; return 1; }
}
check "plain decoding over RPC equals local" same_text plain -m "$work/glm.gguf" --spec none -p "abc"
check "MTP over RPC equals local" same_text mtp -m "$work/glm.gguf" -p "abc" --n-draft 3
check "MTP over RPC accepts what it accepts locally" bash -c '[ "$(grep -oE "drafted [0-9]+, accepted [0-9]+" "$0")" = "$(grep -oE "drafted [0-9]+, accepted [0-9]+" "$1")" ]' "$work/mtp-local.err" "$work/mtp-rpc.err"
check "MTP over RPC accepted drafts" grep -qE "drafted [1-9][0-9]*, accepted [1-9]" "$work/mtp-rpc.err"
check "draft model over RPC equals local" same_text draft -m "$work/llama.gguf" -md "$work/llama.gguf" --spec draft -p "abc" -ngld 99
check "the layers were on the RPC devices" contains "$work/plain-rpc.err" "RPC"
check "info lists the RPC devices" bash -c '"$0" info --rpc "$1" | grep -q "RPC"' "$specdec" "$rpc"

# Addresses that cannot work fail at load, with a message, before llama.cpp aborts.
closed=$(free_port)
"$specdec" generate -m "$work/glm.gguf" --spec none -p abc -n 4 --rpc "127.0.0.1:$closed" >/dev/null 2>"$work/closed.err"
check "unreachable server: exit 1" test $? -eq 1
check "unreachable server: named" contains "$work/closed.err" "IO_ERROR: cannot reach RPC server '127.0.0.1:$closed'"
"$specdec" generate -m "$work/glm.gguf" --spec none -p abc -n 4 --rpc "127.0.0.1" >/dev/null 2>"$work/malformed.err"
check "malformed endpoint: exit 1" test $? -eq 1
check "malformed endpoint: named" contains "$work/malformed.err" "INVALID_ARGUMENT: RPC server '127.0.0.1' is not host:port"

# A server killed mid-generation: exit 1 within a bounded time, a message,
# and the text streamed so far is a prefix of the local run's.
"$specdec" generate -m "$work/glm.gguf" --spec none -p abc -n 3000 -c 4096 --ignore-eos >"$work/long-local.txt" 2>/dev/null
"$specdec" generate -m "$work/glm.gguf" --spec none -p abc -n 3000 -c 4096 --ignore-eos --rpc "$rpc" -ngl 99 \
    >"$work/long-rpc.txt" 2>"$work/long-rpc.err" &
client=$!
pids+=($client)
for _ in $(seq 1 300); do [ "$(wc -c <"$work/long-rpc.txt")" -gt 64 ] && break; sleep 0.1; done
kill -9 "${pids[1]}" # server B
start=$(date +%s)
rc=124
for _ in $(seq 1 600); do
    if ! kill -0 "$client" 2>/dev/null; then wait "$client"; rc=$?; break; fi
    sleep 0.1
done
elapsed=$(( $(date +%s) - start ))
check "lost server: the run ended within 60 s (took ${elapsed} s)" test "$rc" -ne 124
check "lost server: exit 1, not a signal (got $rc)" test "$rc" -eq 1
check "lost server: the failure is named" contains "$work/long-rpc.err" "NATIVE_FAILURE"
check "lost server: text streamed before the loss is kept" test "$(wc -c <"$work/long-rpc.txt")" -gt 64
check "lost server: that text is the local run's" \
    bash -c 'n=$(wc -c <"$0"); [ "$(head -c "$n" "$1")" = "$(cat "$0")" ]' "$work/long-rpc.txt" "$work/long-local.txt"

echo "rpc: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
