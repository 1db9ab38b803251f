package podio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TracefsDirs are where tracefs is found, in the order tried: its own mount point since
// Linux 4.1, then below debugfs (Documentation/trace/ftrace.rst).
var TracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// FindTracefs returns the first of TracefsDirs that holds the nfs trace events; ErrNoNFS
// when tracefs is there without them (the nfs module not loaded yet), another error
// wrapping ErrUnsupported when tracefs is not mounted.
func FindTracefs() (string, error) {
	mounted := false
	for _, dir := range TracefsDirs {
		if _, err := os.Stat(filepath.Join(dir, "events", "nfs", "nfs_initiate_read", "format")); err == nil {
			return dir, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "events")); err == nil {
			mounted = true
		}
	}
	if mounted {
		return "", ErrNoNFS
	}
	return "", fmt.Errorf("%w: tracefs is not mounted at %s", ErrUnsupported, strings.Join(TracefsDirs, " or "))
}

// field is one field of a trace event's record: its offset and size in bytes.
type field struct{ offset, size int }

// recordLayouts are the fields bpf/podio.c reads from each event's record (struct
// rpc_initiate and struct rpc_done there), as fs/nfs/nfstrace.h lays them out from Linux
// 5.10 to 7.2. A kernel that lays them out otherwise keeps PartRPC unloaded rather than
// reading the wrong bytes.
var recordLayouts = map[string]map[string]field{
	"nfs_initiate_read":  initiateLayout,
	"nfs_initiate_write": initiateLayout,
	"nfs_readpage_done":  doneLayout,
	"nfs_writeback_done": doneLayout,
}

var (
	initiateLayout = map[string]field{"dev": {8, 4}, "fileid": {16, 8}, "offset": {24, 8}, "count": {32, 4}}
	doneLayout     = map[string]field{"dev": {8, 4}, "fileid": {16, 8}, "offset": {24, 8}, "res_count": {36, 4}}
)

// checkTracepoints compares each event's format file below tracefs with recordLayouts.
func checkTracepoints(tracefs string) error {
	if tracefs == "" {
		return errors.New("tracefs is not mounted at /sys/kernel/tracing or /sys/kernel/debug/tracing")
	}
	for event, want := range recordLayouts {
		path := filepath.Join(tracefs, "events", "nfs", event, "format")
		b, err := hostfs.ReadFile(path, 64<<10)
		if err != nil {
			return err
		}
		got, err := parseFormat(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for name, w := range want {
			if g, ok := got[name]; !ok || g != w {
				return fmt.Errorf("nfs:%s lays out %s otherwise than this collector reads it (offset %d size %d, want %d and %d)",
					event, name, g.offset, g.size, w.offset, w.size)
			}
		}
	}
	return nil
}

// parseFormat reads the fields of a trace event's format file (kernel/trace/trace_events.c,
// f_show), lines such as
//
//	field:dev_t dev;	offset:8;	size:4;	signed:0;
func parseFormat(b []byte) (map[string]field, error) {
	out := map[string]field{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		var (
			name string
			f    field
			err  error
		)
		for _, part := range strings.Split(line, ";") {
			key, val, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				continue
			}
			switch key {
			case "field":
				decl := strings.Fields(val)
				if len(decl) == 0 {
					return nil, fmt.Errorf("field without a name: %q", line)
				}
				name = decl[len(decl)-1]
				if i := strings.IndexByte(name, '['); i >= 0 {
					name = name[:i]
				}
			case "offset":
				f.offset, err = strconv.Atoi(val)
			case "size":
				f.size, err = strconv.Atoi(val)
			}
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
		}
		out[name] = f
	}
	if len(out) == 0 {
		return nil, errors.New("no fields")
	}
	return out, sc.Err()
}
