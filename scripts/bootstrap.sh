#!/usr/bin/env bash
# Sets up everything specdec needs on a fresh Debian machine:
#   1. the Debian packages for building and testing (skipped when present),
#   2. llama.cpp v0.5.0, fetched once into a cache outside the repository,
#   3. this repository's patches to it (patches/), applied to that cache.
# Prints the llama.cpp source directory on its last line.
#
# Environment:
#   SPECDEC_LLAMA_DIR    use this existing llama.cpp tree instead of fetching
#   SPECDEC_CACHE_DIR    where fetched sources live (default ~/.cache/specdec)
#   SPECDEC_SKIP_APT=1   do not install Debian packages
set -euo pipefail

readonly LLAMA_TAG="v0.5.0"
readonly LLAMA_COMMIT="de3ff815ea7d559ee917f063901b8986f038abc6"
readonly NPM_PACKAGE="node-llama-cpp@3.22.1"
readonly NPM_INTEGRITY="sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw=="
readonly GITHUB_URL="https://github.com/ggml-org/llama.cpp.git"

cache_dir="${SPECDEC_CACHE_DIR:-$HOME/.cache/specdec}"
repo_dir="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "bootstrap: $*" >&2; }
die() { echo "bootstrap: error: $*" >&2; exit 1; }

install_packages() {
    [ "${SPECDEC_SKIP_APT:-0}" = "1" ] && return 0
    local pkgs=(cmake ninja-build g++ git ccache pkg-config openssl python3 curl
                libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
                nlohmann-json3-dev libasio-dev libssl-dev gnuplot-nox clang-14 libclang-rt-14-dev
                python3-pytest cargo rustc   # these three: the binding suites (ctest -L bindings)
                python3-requests python3-filelock python3-wget)  # llama-server's own suite (scripts/upstream-suite.sh)
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    # npm installs the openai client of the `specdec serve` tests and fetches
    # llama.cpp when GitHub is out of reach; node runs those tests and the
    # serving benchmark (Node 18 or later). Any install will do.
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Succeeds when $1 is a llama.cpp tree at the pinned commit (or a tree the
# user pointed us at, which we trust but sanity-check).
is_llama_tree() {
    [ -f "$1/include/llama.h" ] && [ -f "$1/common/speculative.h" ] && [ -f "$1/src/llama-ext.h" ]
}

fetch_from_github() {
    local dest="$1"
    log "trying GitHub ($GITHUB_URL, tag $LLAMA_TAG)"
    timeout 120 git clone -q --depth 1 --branch "$LLAMA_TAG" "$GITHUB_URL" "$dest" 2>/dev/null || return 1
}

fetch_from_npm() {
    local dest="$1" tmp
    tmp="$(mktemp -d)"
    log "trying the npm registry ($NPM_PACKAGE)"
    (cd "$tmp" && timeout 300 npm pack --silent "$NPM_PACKAGE" >/dev/null 2>&1) || { rm -rf "$tmp"; return 1; }
    local tgz integrity
    tgz="$(ls "$tmp"/*.tgz)"
    integrity="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
    if [ "$integrity" != "$NPM_INTEGRITY" ]; then
        rm -rf "$tmp"; die "integrity mismatch for $NPM_PACKAGE: got $integrity"
    fi
    tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
    grep -q "\"tag\": *\"$LLAMA_TAG\"" "$tmp/package/llama/llama.cpp.info.json" \
        || { rm -rf "$tmp"; die "$NPM_PACKAGE does not ship llama.cpp $LLAMA_TAG"; }
    git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$dest" || { rm -rf "$tmp"; return 1; }
    rm -rf "$tmp"
}

fetch_llama() {
    if [ -n "${SPECDEC_LLAMA_DIR:-}" ]; then
        is_llama_tree "$SPECDEC_LLAMA_DIR" || die "SPECDEC_LLAMA_DIR=$SPECDEC_LLAMA_DIR is not a llama.cpp tree with common/speculative.h and src/llama-ext.h"
        echo "$SPECDEC_LLAMA_DIR"; return
    fi
    local dest="$cache_dir/llama.cpp-$LLAMA_TAG"
    if is_llama_tree "$dest" && [ -f "$dest/.specdec-verified" ]; then
        # The marker names the release for the build (older caches have an empty one).
        [ -s "$dest/.specdec-verified" ] || echo "$LLAMA_TAG" >"$dest/.specdec-verified"
        echo "$dest"; return
    fi
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$cache_dir"
    fetch_from_github "$dest.tmp" || { rm -rf "$dest.tmp"; fetch_from_npm "$dest.tmp"; } \
        || die "could not obtain llama.cpp $LLAMA_TAG: GitHub and the npm registry ($NPM_PACKAGE) both failed. Point SPECDEC_LLAMA_DIR at an existing tree."
    local head
    head="$(git -C "$dest.tmp" rev-parse HEAD)"
    # The npm bundle squashes the release into one commit with a known id; a
    # GitHub clone of the tag has the upstream history, so check the tag instead.
    if [ "$head" != "$LLAMA_COMMIT" ] && ! git -C "$dest.tmp" describe --tags --exact-match 2>/dev/null | grep -qx "$LLAMA_TAG"; then
        rm -rf "$dest.tmp"; die "fetched llama.cpp is at $head, expected $LLAMA_TAG ($LLAMA_COMMIT)"
    fi
    is_llama_tree "$dest.tmp" || die "fetched tree lacks the speculative API"
    echo "$LLAMA_TAG" >"$dest.tmp/.specdec-verified" # read by CMakeLists.txt as the release
    mv "$dest.tmp" "$dest"
    log "llama.cpp $LLAMA_TAG is in $dest"
    echo "$dest"
}

# The patches in patches/ (see patches/README.md) are applied to the cached
# tree; a marker names the set applied, so a changed set restores the release's
# files and applies the new one. A tree of the user's (SPECDEC_LLAMA_DIR) is
# never changed: a missing patch is reported, and what it fixes stays broken.
apply_patches() {
    local tree="$1" patches=() want
    patches=("$repo_dir"/patches/*.patch)
    [ -e "${patches[0]}" ] || return 0
    want="$(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)"
    if [ -n "${SPECDEC_LLAMA_DIR:-}" ]; then
        for p in "${patches[@]}"; do
            (cd "$tree" && git apply -R --check "$p" >/dev/null 2>&1) \
                || log "warning: $tree lacks patches/$(basename "$p"); output may depend on batch composition"
        done
        return 0
    fi
    [ "$(cat "$tree/.specdec-patches" 2>/dev/null)" = "$want" ] && return 0
    # A tree that already holds exactly these changes keeps its files (and
    # their times, so nothing is rebuilt).
    if [ "$(git -C "$tree" diff)" = "$(cat "${patches[@]}")" ]; then
        echo "$want" >"$tree/.specdec-patches"
        return 0
    fi
    git -C "$tree" checkout -q -- . || die "cannot restore the release's files in $tree"
    for p in "${patches[@]}"; do
        git -C "$tree" apply "$p" || die "patches/$(basename "$p") does not apply to $tree"
        log "applied patches/$(basename "$p")"
    done
    echo "$want" >"$tree/.specdec-patches"
}

install_packages
tree="$(fetch_llama)"
apply_patches "$tree"
echo "$tree"
