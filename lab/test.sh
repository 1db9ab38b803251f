#!/usr/bin/env bash
# Run the lab integration tests (build tag "lab") inside one boot of the lab guest, against
# the nfstune binary built from this tree.
#   lab/test.sh [-run REGEXP] [-test.FLAG...]
# LAB_PACKAGES lists the test packages (default ./lab/labtest ./lab/agentlab); each is compiled with
# `go test -c -tags lab` and run in turn, in the same boot, with -test.v. Binaries and tests
# are built for the guest's architecture (GOARCH=arm64 for NFSTUNE_LAB_GUEST=arm64).
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
	export CGO_ENABLED=0 GOARCH=$LAB_ARCH
	"$GO" build -trimpath -o "$bin/nfstune" ./cmd/nfstune
	# Numbered so that the packages run in the order given: the agent raises every mount's
	# read-ahead, which the apply tests must not inherit.
	i=0
	for pkg in ${LAB_PACKAGES:-./lab/labtest ./lab/agentlab}; do
		i=$((i + 1))
		"$GO" test -c -tags lab -o "$bin/$i-$(basename "$pkg").test" "$pkg"
	done
)
gbin=/lab/${bin#"$repo"/}

# The 6.1 suite reads for minutes at emulated round trips (the read-ahead verdicts, the
# recovery window): 40 minutes per package, and an hour for the boot, unless
# NFSTUNE_LAB_TIMEOUT says otherwise.
args=(-test.v -test.timeout=40m)
export NFSTUNE_LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-3600}
while (($#)); do
	case $1 in
	-run) args+=("-test.run=$2"); shift 2 ;;
	-test.*) args+=("$1"); shift ;;
	*) lab_die "unknown argument $1" ;;
	esac
done

# Every package runs even when one fails; the exit status is the first failure's.
# shellcheck disable=SC2016
runner='rc=0; for t in "$0"/*.test; do echo "=== package $(basename "$t" .test)"; "$t" "$@" || { s=$?; ((rc)) || rc=$s; }; done; exit $rc'
# NFSTUNE_LAB_* settings of the tests themselves (e.g. NFSTUNE_LAB_REACTION_P99) reach the guest.
settings=(NFSTUNE_LAB_CURVE_OUT NFSTUNE_LAB_BASE_BIN NFSTUNE_LAB_BASE_REF NFSTUNE_LAB_MAX_RATIO NFSTUNE_LAB_ROUNDS NFSTUNE_LAB_REACTION_P99 NFSTUNE_LAB_CHURN NFSTUNE_LAB_SCENARIOS NFSTUNE_LAB_PAIRS NFSTUNE_LAB_FIXED_LATE NFSTUNE_LAB_STAGGER NFSTUNE_LAB_ARMS NFSTUNE_LAB_WINDOW NFSTUNE_LAB_SETTLE)
passenv=()
for v in "${settings[@]}"; do
	[[ -n ${!v:-} ]] && passenv+=("$v=${!v}")
done
"$here/vm.sh" --scenario -- env NFSTUNE_BIN="$gbin/nfstune" "${passenv[@]}" bash -c "$runner" "$gbin" "${args[@]}"
