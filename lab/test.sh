#!/usr/bin/env bash
# Run the lab integration tests (package lab/labtest, build tag "lab") inside one boot of the
# lab guest, against the nfstune binary built from this tree.
#   lab/test.sh [-run REGEXP]     extra arguments go to the test binary (-test. prefix added)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
. "$here/lib.sh"
GO=${GO:-go}

# The binaries go to a directory of their own: others may rebuild bin/nfstune meanwhile.
mkdir -p "$repo/lab/.cache"
bin=$(mktemp -d "$repo/lab/.cache/bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
lab_log "building nfstune and the lab tests"
(
	cd "$repo"
	CGO_ENABLED=0 "$GO" build -trimpath -o "$bin/nfstune" ./cmd/nfstune
	CGO_ENABLED=0 "$GO" test -c -tags lab -o "$bin/labtest.test" ./lab/labtest
)
gbin=/lab/${bin#"$repo"/}

args=(-test.v -test.timeout=15m)
while (($#)); do
	case $1 in
	-run) args+=("-test.run=$2"); shift 2 ;;
	-test.*) args+=("$1"); shift ;;
	*) lab_die "unknown argument $1" ;;
	esac
done

"$here/vm.sh" --scenario -- env NFSTUNE_BIN="$gbin/nfstune" "$gbin/labtest.test" "${args[@]}"
