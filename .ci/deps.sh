#!/usr/bin/env bash
# Installs the Debian packages glint builds and tests with: the OpenCL
# headers and ICD loader for the cgo binding; two CPU OpenCL devices, PoCL
# and Mesa's rusticl (mesa-opencl-icd: its llvmpipe device, which the tests
# enable with RUSTICL_ENABLE=llvmpipe), so that every kernel is built and
# checked by two OpenCL compilers; npm (for `make onnxruntime`) where it is
# missing; tmux, in which the chat tests drive `generate chat` as a person
# would; and clang, whose OpenCL C front end checks the kernel builds for
# extensions neither device offers (TestKernelBuilds).
set -euo pipefail
pkgs=(opencl-headers ocl-icd-opencl-dev pocl-opencl-icd mesa-opencl-icd clinfo tmux clang-15)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
