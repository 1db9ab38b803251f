// Package labtest holds nfstune's integration tests against a real Linux NFS server and
// client. They run inside the lab guest (see lab/README.md), never on the host: every file
// but this one carries the build tag "lab", and the helpers refuse to run outside the guest.
//
// Build and run them with `make lab-test`, which compiles this package with
// `go test -c -tags lab`, boots the guest once, mounts the lab scenario and runs the test
// binary there with the freshly built nfstune.
package labtest
