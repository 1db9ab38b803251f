#!/usr/bin/env bash
# Print the version a build carries: the release in internal/version/VERSION when HEAD is that tag
# and the tree is clean, else a pre-release of it named after the commit,
# v0.1.0-dev.g<commit>[.dirty], a SemVer that is also a valid image tag. The Makefile stamps
# it into the binaries (nfstune version), the image tags, and the chart's version and
# appVersion.
set -euo pipefail
cd "$(dirname "$0")/.."
release=$(tr -d '[:space:]' <internal/version/VERSION)
[[ $release =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { printf 'version: internal/version/VERSION holds %q, want vMAJOR.MINOR.PATCH\n' "$release" >&2; exit 1; }
rev=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo "$release-dev"; exit 0; }
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=.dirty
if [[ -z $dirty ]] && git tag --points-at HEAD | grep -qx -- "$release"; then
	echo "$release"
else
	echo "$release-dev.g$rev$dirty"
fi
