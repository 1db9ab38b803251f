#!/usr/bin/env bash
# Compare the tree under test with an earlier one in one boot of the lab guest
# (lab/sidebyside): nfstune is built from this tree and from REF (a git ref of this
# repository, exported with git archive into a temporary directory), and the lab's
# side-by-side tests run both binaries alternately, REF first, and report p50 and max of
# each and their ratio. LAB_PACKAGES=./lab/ratable with NFSTUNE_LAB_ARMS=base,default runs
# the read-ahead table with REF's agent as an arm beside this tree's.
#   lab/sidebyside.sh REF [-run REGEXP] [-test.FLAG...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib.sh"
GO=${GO:-go}
ref=${1:?usage: lab/sidebyside.sh REF [-run REGEXP] [-test.FLAG...]}
shift
commit=$(git -C "$repo" rev-parse --verify "$ref^{commit}")

mkdir -p "$repo/lab/.cache"
src=$(mktemp -d)
out=$(mktemp -d "$repo/lab/.cache/base.XXXXXX")
trap 'rm -rf "$src" "$out"' EXIT
lab_log "building nfstune from $ref (${commit:0:12})"
git -C "$repo" archive "$commit" | tar -x -C "$src"
(
	cd "$src"
	CGO_ENABLED=0 GOARCH=$LAB_ARCH "$GO" build -trimpath -o "$out/nfstune" ./cmd/nfstune
)
NFSTUNE_LAB_BASE_BIN=/lab/${out#"$repo"/}/nfstune NFSTUNE_LAB_BASE_REF=${ref} \
	LAB_PACKAGES=${LAB_PACKAGES:-./lab/sidebyside} "$here/test.sh" "$@"
