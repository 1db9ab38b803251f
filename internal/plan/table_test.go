package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWriteShowTable reads Azure Files provisioned v1 at 4,000 GiB from its table: the
// published 500 MiB/s and 7,000 IOPS bursting to 12,000, the show-only column head, and no
// ranking line (Show does not rank).
func TestWriteShowTable(t *testing.T) {
	t.Parallel()
	c, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Show(c, nil, "azure-files", "provisioned-v1", 4000*GiB, Need{Access: Read})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteShowTable(&out, r); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"Need: capacity 4,000 GiB (3.91 TiB), reads, client NIC not given\n",
		"CLIENTS TO SATURATE 1 CONN/NCONNECT",
		"azure-files/provisioned-v1  share 4,000 GiB  500 MiB/s   7,000 (12,000)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "Ranked by") {
		t.Errorf("show table has a ranking line:\n%s", s)
	}
}

type failingWriter struct{}

var errClosed = errors.New("pipe closed")

func (failingWriter) Write([]byte) (int, error) { return 0, errClosed }

func TestWriteTableReturnsWriteError(t *testing.T) {
	t.Parallel()
	c, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Plan(c, nil, Need{Throughput: 500 * MiB, Access: Read})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(failingWriter{}, r); !errors.Is(err, errClosed) {
		t.Errorf("err = %v, want %v", err, errClosed)
	}
}
