package hostfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRootPaths(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{name: "production proc", got: Root("/").Proc("self", "mountstats"), want: "/proc/self/mountstats"},
		{name: "container sys", got: Root("/host").Sys("class", "bdi"), want: "/host/sys/class/bdi"},
		{name: "fixture etc", got: Root("testdata/root").Etc("fstab"), want: "testdata/root/etc/fstab"},
		{name: "path", got: Root("/host").Path("run", "udev"), want: "/host/run/udev"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

var deviceTests = []struct {
	in   string
	want bool
}{
	{"0:53", true},
	{"8:0", true},
	{"4294967295:4294967295", true},
	{"", false},
	{"0", false},
	{"0:", false},
	{":53", false},
	{"0:53:1", false},
	{"-1:0", false},
	{"+1:0", false},
	{" 0:53", false},
	{"0:53\n", false},
	{"0x1:0", false},
	{"4294967296:0", false}, // over 32 bits
	{"..", false},
	{"../../../etc", false},
	{"0:53/../../..", false},
	{"0:53/read_ahead_kb", false},
}

func TestValidDevice(t *testing.T) {
	for _, tt := range deviceTests {
		if got := ValidDevice(tt.in); got != tt.want {
			t.Errorf("ValidDevice(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestBDI(t *testing.T) {
	root := Root("/host")
	got, err := root.BDI("0:53")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/host/sys/class/bdi/0:53"; got != want {
		t.Errorf("BDI(0:53) = %q, want %q", got, want)
	}
	for _, tt := range deviceTests {
		if tt.want {
			continue
		}
		if p, err := root.BDI(tt.in); err == nil {
			t.Errorf("BDI(%q) = %q, want an error", tt.in, p)
		}
	}
}

// FuzzBDI checks that no device name yields a path outside /sys/class/bdi: the read-ahead
// writers build the path they write from a device name found in mountinfo.
func FuzzBDI(f *testing.F) {
	for _, tt := range deviceTests {
		f.Add(tt.in)
	}
	root := Root("/host")
	class := root.Sys("class", "bdi")
	f.Fuzz(func(t *testing.T, device string) {
		p, err := root.BDI(device)
		if err != nil {
			return
		}
		if filepath.Dir(p) != class || filepath.Clean(p) != p {
			t.Errorf("BDI(%q) = %q, outside %s", device, p, class)
		}
	})
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "attr")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSmall(t *testing.T) {
	p := writeFile(t, "0 1 2\n")
	got, err := ReadSmall(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "0 1 2\n" {
		t.Errorf("ReadSmall = %q", got)
	}
	if _, err := ReadSmall(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist", err)
	}
}

// TestReadSmallProcSize reads a /proc file whose size is reported as 0: ReadSmall must not
// trust the size.
func TestReadSmallProcSize(t *testing.T) {
	const p = "/proc/self/stat"
	st, err := os.Stat(p)
	if err != nil {
		t.Fatalf("this test needs Linux's /proc: %v", err)
	}
	if st.Size() != 0 {
		t.Fatalf("%s reports %d bytes; the test needs a file that reports 0", p, st.Size())
	}
	b, err := ReadSmall(p)
	if err != nil {
		t.Fatal(err)
	}
	// The second field is the command name in parentheses.
	if !strings.Contains(string(b), "(") {
		t.Errorf("ReadSmall(%s) = %q, want the process's stat line", p, b)
	}
}

func TestReadSmallCap(t *testing.T) {
	for _, tt := range []struct {
		size    int64
		wantErr bool
	}{
		{MaxSmall, false},
		{MaxSmall + 1, true},
	} {
		p := filepath.Join(t.TempDir(), "big")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		// A sparse file: the size without writing the bytes.
		if err := f.Truncate(tt.size); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := ReadSmall(p)
		switch {
		case tt.wantErr && !errors.Is(err, ErrTooLarge):
			t.Errorf("size %d: err = %v, want ErrTooLarge", tt.size, err)
		case !tt.wantErr && err != nil:
			t.Errorf("size %d: %v", tt.size, err)
		case !tt.wantErr && int64(len(b)) != tt.size:
			t.Errorf("size %d: read %d bytes", tt.size, len(b))
		}
	}
}

func TestReadInt(t *testing.T) {
	got, err := ReadInt(writeFile(t, "15360\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got != 15360 {
		t.Errorf("ReadInt = %d, want 15360", got)
	}
	for _, bad := range []string{"", "128 KiB\n", "0x80\n", "1 2\n"} {
		p := writeFile(t, bad)
		if n, err := ReadInt(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadInt(%q) = %d, %v; want an error naming the file", bad, n, err)
		}
	}
}

func TestReadString(t *testing.T) {
	got, err := ReadString(writeFile(t, "  always [madvise] never \n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "always [madvise] never"; got != want {
		t.Errorf("ReadString = %q, want %q", got, want)
	}
}

// returnsWithin runs f and fails the test if it has not returned after d: a read that
// blocks forever (a FIFO without a writer) must fail instead.
func returnsWithin(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %s", d)
	}
}

func TestReadFileRefusesNonRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		returnsWithin(t, 10*time.Second, func() {
			if _, err := ReadFile(p, 1<<10); !errors.Is(err, ErrNotRegular) {
				t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", p, err)
			}
			if _, err := ReadSmall(p); !errors.Is(err, ErrNotRegular) {
				t.Errorf("ReadSmall(%s) = %v, want ErrNotRegular", p, err)
			}
		})
	}
	// Kernel pseudo-files are regular files.
	for _, p := range []string{"/proc/self/mountinfo", "/proc/sys/kernel/ostype"} {
		if b, err := ReadSmall(p); err != nil || len(b) == 0 {
			t.Errorf("ReadSmall(%s) = %d bytes, %v", p, len(b), err)
		}
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(small, 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadFile at the cap = %q, %v", b, err)
	}
	if _, err := ReadFile(small, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the cap = %v, want ErrTooLarge", err)
	}
}

// TestReadDirRefusesFIFO lists a directory and a FIFO in its place: os.ReadDir's plain
// open(2) would wait for a writer.
func TestReadDirRefusesFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"b.conf", "a.conf"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := ReadDir(dir)
	if err != nil || len(entries) != 2 || entries[0].Name() != "a.conf" || entries[1].Name() != "b.conf" {
		t.Errorf("ReadDir = %v, %v; want a.conf and b.conf, sorted", entries, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, 10*time.Second, func() {
		if _, err := ReadDir(fifo); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("ReadDir(FIFO) = %v, want ENOTDIR", err)
		}
	})
}

func TestReadFileNoFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	if err := os.WriteFile(real, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileNoFollow(real, 1); err != nil || string(b) != "x" {
		t.Errorf("ReadFileNoFollow(file) = %q, %v", b, err)
	}
	if _, err := ReadFileNoFollow(link, 1); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("ReadFileNoFollow(link) = %v, want ELOOP", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	returnsWithin(t, 10*time.Second, func() {
		if _, err := ReadFileNoFollow(fifo, 1); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFileNoFollow(FIFO) = %v, want ErrNotRegular", err)
		}
	})
}

// pageReader hands out at most one page per Read, as a seq_file does, and records the room
// each Read was offered.
type pageReader struct {
	data   []byte
	offers []int
}

func (r *pageReader) Read(p []byte) (int, error) {
	r.offers = append(r.offers, len(p))
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[:min(len(r.data), os.Getpagesize())])
	r.data = r.data[n:]
	return n, nil
}

// TestReadAllOffersAPage checks that the first read is offered a whole page (or the
// limit), so that a seq_file of up to one page is produced in one pass (io.ReadAll offers
// 512 bytes), and that the limit and the content are kept.
func TestReadAllOffersAPage(t *testing.T) {
	page := os.Getpagesize()
	for _, tt := range []struct {
		size  int
		limit int64
		want  int
	}{
		{size: 60, limit: 1 << 20, want: 60},
		{size: page - 1, limit: 1 << 20, want: page - 1},
		{size: page, limit: 1 << 20, want: page},
		{size: 5*page + 17, limit: 1 << 20, want: 5*page + 17},
		{size: 3 * page, limit: int64(page + 10), want: page + 10},
		{size: 100, limit: 10, want: 10},
	} {
		data := bytes.Repeat([]byte("v4 0a000002  801 0:52 0:0 0:0 0:0 no\n"), tt.size/37+1)[:tt.size]
		r := &pageReader{data: data}
		got, err := readAll(r, tt.limit)
		if err != nil {
			t.Fatalf("size %d: %v", tt.size, err)
		}
		if !bytes.Equal(got, data[:tt.want]) {
			t.Errorf("size %d limit %d: read %d bytes, want the first %d", tt.size, tt.limit, len(got), tt.want)
		}
		if want := min(page, int(tt.limit)); r.offers[0] != want {
			t.Errorf("size %d limit %d: the first read was offered %d bytes, want %d", tt.size, tt.limit, r.offers[0], want)
		}
	}
}

// TestReadAllOwnsItsBytes: what readAll returns is not its pooled first page, which the
// next read fills again.
func TestReadAllOwnsItsBytes(t *testing.T) {
	first, err := readAll(strings.NewReader("128\n"), 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(strings.NewReader("4096\n"), 64); err != nil {
		t.Fatal(err)
	}
	if string(first) != "128\n" {
		t.Errorf("the first read now holds %q, want 128", first)
	}
	if cap(first) >= os.Getpagesize() {
		t.Errorf("a 4-byte read kept %d bytes", cap(first))
	}
}
