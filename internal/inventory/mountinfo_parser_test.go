package inventory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMountInfoParserEqualsParseMountInfo reads a mount table through its changes with one
// MountInfoParser, and checks each read against ParseMountInfo of the same file: a new
// mount, a bind mount of a known superblock, a remount with other options, a mount point
// gone, a loopback proxy, a malformed line and a superblock unmounted and mounted again
// with the same device.
func TestMountInfoParserEqualsParseMountInfo(t *testing.T) {
	t.Parallel()
	const (
		root  = "21 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
		a     = "101 21 0:53 / /mnt/a rw,relatime shared:60 - nfs4 srv:/a rw,vers=4.2,rsize=1048576,addr=10.0.0.5\n"
		aBind = "105 21 0:53 /sub /srv/a\\040b ro,relatime - nfs4 srv:/a rw,vers=4.2,rsize=1048576,addr=10.0.0.5\n"
		aRO   = "101 21 0:53 / /mnt/a ro,relatime shared:60 - nfs4 srv:/a ro,vers=4.2,rsize=262144,addr=10.0.0.5\n"
		b     = "102 21 0:54 / /mnt/b rw - nfs srv:/b rw,vers=3,nconnect=4,addr=10.0.0.6\n"
		proxy = "103 21 0:55 / /mnt/efs rw - nfs4 127.0.0.1:/ rw,vers=4.1,port=20049,addr=127.0.0.1\n"
		bad   = "bad line\n"
		b2    = "110 21 0:54 / /mnt/b2 rw - nfs srv:/b2 rw,vers=4.1,addr=10.0.0.7\n"
	)
	steps := []struct{ name, file string }{
		{"empty", root},
		{"first mount", root + a},
		{"same file again", root + a},
		{"a second superblock", root + a + b},
		{"a bind mount of the first", root + a + aBind + b},
		{"a remount", root + aRO + aBind + b},
		{"a mount point gone", root + aRO + b},
		{"a loopback proxy", root + aRO + b + proxy},
		{"a malformed line", root + aRO + bad + b + proxy},
		{"malformed lines of two kinds", root + aRO + bad + "104 21 0:53/.. / /x rw - nfs4 s:/x rw\n" + b + bad + proxy},
		{"a device used again by another export", root + aRO + b2 + proxy},
		{"everything gone", root},
		{"first mount again", root + a},
	}
	var p MountInfoParser
	for _, s := range steps {
		got, gotWarnings := p.Parse([]byte(s.file))
		want, wantWarnings := ParseMountInfo([]byte(s.file))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: MountInfoParser differs from ParseMountInfo (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(wantWarnings, gotWarnings); diff != "" {
			t.Errorf("%s: warnings differ (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestMountInfoParserProxyIsACopy: AttributeProxies fills in the Proxy of the Mounts it is
// given, so a Mount kept for the next read must not see what was written into the last.
func TestMountInfoParserProxyIsACopy(t *testing.T) {
	t.Parallel()
	file := []byte("103 21 0:55 / /mnt/efs rw - nfs4 127.0.0.1:/ rw,vers=4.1,port=20049,addr=127.0.0.1\n")
	var p MountInfoParser
	first, _ := p.Parse(file)
	if len(first) != 1 || first[0].Proxy == nil {
		t.Fatalf("first read = %+v, want one mount through a loopback proxy", first)
	}
	first[0].Proxy.Kind, first[0].Proxy.ReadAheadKB = ProxyEFS, 15360
	second, _ := p.Parse(file)
	if got := second[0].Proxy; got.Kind != ProxyLoopback || got.ReadAheadKB != 0 {
		t.Errorf("second read's proxy = %+v: it kept what was written into the first read's", got)
	}
}

// TestMountInfoParserReusesUnchanged checks that the parser keeps what it built: a read of
// a file with one more superblock builds that one and returns the others' Options maps as
// they were (the same map, not a new parse of the same options).
func TestMountInfoParserReusesUnchanged(t *testing.T) {
	t.Parallel()
	var file strings.Builder
	for i := range 3 {
		fmt.Fprintf(&file, "10%d 21 0:5%d / /mnt/%d rw - nfs4 srv:/e rw,vers=4.2,addr=10.0.0.5\n", i, i, i)
	}
	var p MountInfoParser
	before, _ := p.Parse([]byte(file.String()))
	file.WriteString("109 21 0:59 / /mnt/new rw - nfs4 srv:/new rw,vers=4.2,addr=10.0.0.5\n")
	after, _ := p.Parse([]byte(file.String()))
	if len(before) != 3 || len(after) != 4 {
		t.Fatalf("read %d then %d superblocks, want 3 then 4", len(before), len(after))
	}
	for i := range before {
		before[i].Options["marker"] = "kept"
		if after[i].Options["marker"] != "kept" {
			t.Errorf("%s: built again although its lines did not change", after[i].Device)
		}
	}
	if _, ok := after[3].Options["marker"]; ok {
		t.Errorf("the new superblock shares a map with a known one")
	}
}

// FuzzMountInfoParser: whatever the parser read before, its read of a file equals
// ParseMountInfo's.
func FuzzMountInfoParser(f *testing.F) {
	a := "101 21 0:53 / /mnt/a rw,relatime shared:60 - nfs4 srv:/a rw,vers=4.2,addr=10.0.0.5\n"
	f.Add(a, a+"102 21 0:54 / /mnt/b rw - nfs srv:/b rw,vers=3\n")
	f.Add(a+"bad\n", "bad\n"+a)
	f.Add(a, "101 21 0:53 / /mnt/a ro - nfs4 srv:/a rw,vers=4.2\n612 22 0:52/.. / /y rw - nfs4 s:/y rw\n")
	f.Fuzz(func(t *testing.T, before, file string) {
		var p MountInfoParser
		p.Parse([]byte(before))
		got, gotWarnings := p.Parse([]byte(file))
		want, wantWarnings := ParseMountInfo([]byte(file))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after %q, %q: -ParseMountInfo +MountInfoParser:\n%s", before, file, diff)
		}
		if diff := cmp.Diff(wantWarnings, gotWarnings); diff != "" {
			t.Errorf("after %q, %q: warnings -ParseMountInfo +MountInfoParser:\n%s", before, file, diff)
		}
	})
}
