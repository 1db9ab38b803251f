//go:build lab

package labtest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestMain copies the binary under test from the 9p share to the guest's memory: run from
// 9p under emulation, every exec pages the binary in over virtio and costs seconds.
func TestMain(m *testing.M) {
	src := os.Getenv(EnvBin)
	if src == "" {
		os.Exit(m.Run())
	}
	dst, err := copyToTemp(src)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labtest: %v\n", err)
		os.Exit(2)
	}
	os.Setenv(EnvBin, dst)
	code := m.Run()
	os.RemoveAll(filepath.Dir(dst))
	os.Exit(code)
}

func copyToTemp(src string) (string, error) {
	dir, err := os.MkdirTemp("", "labtest-bin.")
	if err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("opening the binary under test: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", fmt.Errorf("copying %s: %w", src, err)
	}
	return dst, out.Close()
}
