#!/usr/bin/env bash
# Installs the ONNX Runtime shared library that the onnx package loads at run
# time into third_party/onnxruntime/libonnxruntime.so.1 (git-ignored).
#
# The version follows github.com/yalue/onnxruntime_go in go.mod: its bundled C
# header pins ORT_API_VERSION, and ORT 1.N serves API version N, so we take the
# newest stable 1.N.x. The binary comes from the npm package onnxruntime-node,
# which ships the official Linux x64 build (package/bin/napi-v6/linux/x64/).
#
# Idempotent: does nothing when the right version is already there.
# Usage: scripts/onnxruntime.sh [--force]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/third_party/onnxruntime"
lib="$dest/libonnxruntime.so.1"
stamp="$dest/VERSION"

die() { echo "onnxruntime.sh: $*" >&2; exit 1; }

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*) die "only Linux x86_64 is supported (this is $(uname -s)/$(uname -m)); set ONNXRUNTIME_LIB to your own libonnxruntime" ;;
esac

command -v go >/dev/null || die "go not found (needed to read the onnxruntime_go version from go.mod)"
command -v npm >/dev/null || die "npm not found (the library is taken from the npm package onnxruntime-node)"

moddir=$(cd "$root" && go list -m -f '{{.Dir}}' github.com/yalue/onnxruntime_go) ||
	die "github.com/yalue/onnxruntime_go is not in go.mod"
modver=$(cd "$root" && go list -m -f '{{.Version}}' github.com/yalue/onnxruntime_go)
# On a fresh machine the module is not downloaded yet, and its header is what we read.
if [ -z "$moddir" ] || [ ! -f "$moddir/onnxruntime_c_api.h" ]; then
	(cd "$root" && go mod download github.com/yalue/onnxruntime_go) || die "go mod download github.com/yalue/onnxruntime_go failed"
	moddir=$(cd "$root" && go list -m -f '{{.Dir}}' github.com/yalue/onnxruntime_go)
fi
[ -n "$moddir" ] && [ -f "$moddir/onnxruntime_c_api.h" ] ||
	die "onnxruntime_go $modver source not found (run: go mod download github.com/yalue/onnxruntime_go)"
api=$(sed -n 's/^#define ORT_API_VERSION \([0-9][0-9]*\).*/\1/p' "$moddir/onnxruntime_c_api.h")
[ -n "$api" ] || die "no ORT_API_VERSION in $moddir/onnxruntime_c_api.h"

# Newest stable 1.<api>.x: npm lists versions oldest first; pre-releases carry a '-'.
ver=$(npm view onnxruntime-node versions --json 2>/dev/null |
	tr -d ' ",[]' | grep -E "^1\.${api}\.[0-9]+$" | sort -t. -k3,3n | tail -n 1) || true
[ -n "$ver" ] || die "npm has no onnxruntime-node 1.${api}.x release"

if [ "${1:-}" != "--force" ] && [ -f "$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$ver" ]; then
	echo "onnxruntime.sh: ONNX Runtime $ver already in $lib (onnxruntime_go $modver, C API $api)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "onnxruntime.sh: fetching onnxruntime-node@$ver for onnxruntime_go $modver (C API $api)"
(cd "$tmp" && npm pack --silent "onnxruntime-node@$ver" >/dev/null 2>&1) || die "npm pack onnxruntime-node@$ver failed"
shopt -s nullglob
tgzs=("$tmp"/onnxruntime-node-*.tgz)
tgz=${tgzs[0]:-}
[ -n "$tgz" ] || die "npm pack produced no tarball"
tar -xzf "$tgz" -C "$tmp" --wildcards 'package/bin/napi-v6/linux/x64/libonnxruntime.so*' ||
	die "onnxruntime-node@$ver has no package/bin/napi-v6/linux/x64/libonnxruntime.so*"

# The real file is libonnxruntime.so.1.N.x; .so.1 may be a copy or a link.
x64="$tmp/package/bin/napi-v6/linux/x64"
srcs=("$x64"/libonnxruntime.so.1.*)
src=${srcs[0]:-$x64/libonnxruntime.so.1}
[ -f "$src" ] || die "libonnxruntime.so.1 not found in onnxruntime-node@$ver"

mkdir -p "$dest"
cp -L "$src" "$lib.tmp"
mv -f "$lib.tmp" "$lib"
echo "$ver" >"$stamp"
echo "onnxruntime.sh: installed ONNX Runtime $ver as $lib ($(du -h "$lib" | cut -f1))"
