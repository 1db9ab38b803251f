#!/usr/bin/env bash
# Regenerates the per-pod NFS I/O collector's eBPF objects and Go bindings (internal/podio,
# bpf2go through go generate), which are committed so that a build needs no clang, and
# records the digests of the sources and of what was generated from them.
#
#   hack/bpf-gen.sh           regenerate (make bpf); needs hack/deps.sh's bpf group
#   hack/bpf-gen.sh --check   fail when the sources or the outputs changed since the last
#                             regeneration (make verify); needs only sha256sum
#
# The check compares digests, not a fresh compile: clang's output differs between versions,
# so a rebuild on another machine is no proof of staleness, while a source edited without
# `make bpf` (or an output edited by hand) is.
set -euo pipefail
cd "$(dirname "$0")/../internal/podio"

sums=bpf/GENERATED.sha256

digests() {
	sha256sum bpf/*.c bpf/*.h podio_*_bpfel.go podio_*_bpfel.o
}

if [[ ${1:-} == --check ]]; then
	if ! diff -u "$sums" <(digests) >/dev/null; then
		printf 'internal/podio: the eBPF sources or objects changed since they were generated (%s); run make bpf\n' "$sums" >&2
		diff -u "$sums" <(digests) >&2 || true
		exit 1
	fi
	exit 0
fi

../../hack/deps.sh ensure bpf
BPF2GO_CC=clang-14 BPF2GO_STRIP=llvm-strip ${GO:-go} generate ./...
digests >"$sums"
