// Package release checks what `make release` writes to bin/release: the static binaries of
// every cmd/* program for each architecture, the agent's OCI image index, the packaged Helm
// chart, a CycloneDX SBOM per binary and SHA256SUMS. It has no code of its own: its test
// files carry the build tag "release" and read the directory that NFSTUNE_RELEASE_DIR
// names; `make release` runs them (make release-test alone on a finished release).
package release
