// Package golden compares a test's output with a file of the expected output, and rewrites
// that file when UPDATE_GOLDEN is set: the one switch for every golden file of the module
// (`UPDATE_GOLDEN=1 go test ./...`, or the packages named). Review the diff of a rewrite in
// the same commit. Test support, not part of the binary.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Updating reports whether the goldens are being rewritten (UPDATE_GOLDEN is set), for a
// test that writes a golden file of its own shape.
func Updating() bool { return os.Getenv("UPDATE_GOLDEN") != "" }

// Check compares got with the file at path: with UPDATE_GOLDEN set it writes got there
// (creating the directory) instead, else it fails t with a diff when they differ, or when
// the file is missing.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); UPDATE_GOLDEN=1 rewrites it if the change is intended:\n%s", path, diff)
	}
}
