#!/usr/bin/env bash
# Write the kubectl plugin's krew archives and manifest, and the release notes, into a release
# directory that holds kubectl-nfstune-linux-<arch> (make release-binaries).
#
#   hack/release-extras.sh DIR VERSION BASE_URL
#
# kubectl-nfstune-linux-<arch>.tar.gz holds kubectl-nfstune and LICENSE, reproducibly (sorted,
# owner 0, mtime 0, gzip without a name or time). nfstune.yaml is krew's plugin manifest
# (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/), each platform's uri
# BASE_URL/<archive> with the archive's sha256. RELEASE-NOTES.md is the CHANGELOG section of
# VERSION, or of [Unreleased] for a pre-release.
set -euo pipefail
dir=$1 version=$2 base=$3
here=$(cd "$(dirname "$0")/.." && pwd)

platforms=
for bin in "$dir"/kubectl-nfstune-linux-*; do
	[[ $(basename "$bin") == *.* ]] && continue # the archives and SBOMs
	arch=${bin##*-linux-}
	stage=$(mktemp -d)
	install -m 0755 "$bin" "$stage/kubectl-nfstune"
	install -m 0644 "$here/LICENSE" "$stage/LICENSE"
	archive=kubectl-nfstune-linux-$arch.tar.gz
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - kubectl-nfstune LICENSE |
		gzip -9n >"$dir/$archive"
	rm -rf "$stage"
	sum=$(sha256sum "$dir/$archive" | cut -d' ' -f1)
	platforms+="  - selector:
      matchLabels:
        os: linux
        arch: $arch
    uri: $base/$archive
    sha256: $sum
    bin: kubectl-nfstune
    files:
      - from: kubectl-nfstune
        to: .
      - from: LICENSE
        to: .
"
done
[[ -n $platforms ]] || { echo "release-extras: no kubectl-nfstune-linux-<arch> in $dir" >&2; exit 1; }

cat >"$dir/nfstune.yaml" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: nfstune
spec:
  version: $version
  homepage: https://github.com/nfstune/nfstune
  shortDescription: Audit the NFS client tuning of every node
  description: |
    kubectl nfstune asks the nfstune agents of a cluster, through the API server's
    proxy, whether each node's NFS mounts carry the read-ahead and mount options of
    their policy, and prints each node's status and findings.
  platforms:
$platforms
YAML

# The notes: the CHANGELOG section of this release, [Unreleased] for a pre-release.
section="[${version#v}]"
[[ $version == *-* ]] && section="[Unreleased]"
awk -v head="## $section" '
	index($0, head) == 1 { on = 1; print "# nfstune " substr(head, 4); next }
	on && /^## \[/ { exit }
	on { print }
' "$here/CHANGELOG.md" >"$dir/RELEASE-NOTES.md"
grep -q '[^[:space:]]' <(tail -n +2 "$dir/RELEASE-NOTES.md") ||
	{ echo "release-extras: CHANGELOG.md has no section $section" >&2; exit 1; }
