#!/usr/bin/env bash
# Compare nfstune stats --view attr,dir,page with nfs-utils' nfsiostat -a, -d and -p on
# saved mountstats samples (hack/compare-nfsiostat-views.py lists the figures).
#
# Usage, from the repository root, as root (nfsiostat reads only /proc/self/mountstats, so
# it runs in a private mount namespace whose /proc holds the sample):
#   hack/compare-nfsiostat-views.sh SAMPLES_DIR
# SAMPLES_DIR holds *.mountstats files, e.g. the real samples next to nfstune's checkout
# (../shared/real-mountstats); they are read in place, never copied here.
# Needs: go, python3, unshare, nfsiostat (Debian: nfs-common).
# Exit status: 0 every figure matches, 1 a mismatch, 2 the comparison could not run.
# KEEP=1 keeps the work directory (the entries, one report per sample).
set -u
samples=${1:?usage: hack/compare-nfsiostat-views.sh SAMPLES_DIR}
samples=$(cd "$samples" && pwd) || exit 2
here=$(cd "$(dirname "$0")/.." && pwd) || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/nfstune-nfsiostat-views.XXXXXX") || exit 2
if [ "${KEEP:-0}" = 1 ]; then
	echo "work directory: $work" >&2
else
	trap 'rm -rf "$work"' EXIT
fi
if ! (cd "$here" && nice go build -o "$work/nfstune" ./cmd/nfstune); then
	echo "SUMMARY: go build ./cmd/nfstune failed"
	exit 2
fi
nice python3 "$here/hack/compare-nfsiostat-views.py" "$samples" "$work/nfstune" "$work"
