package tune

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

var raiseTests = []struct {
	name, cur string
	want      int64
	exact     bool
	out       string
	change    bool
	wantErr   bool
}{
	{name: "raise", cur: "2\n", want: 128, out: "128", change: true},
	{name: "equal", cur: "128\n", want: 128},
	{name: "higher kept", cur: "65536\n", want: 128},
	{name: "higher lowered with exact", cur: "65536\n", want: 128, exact: true, out: "128", change: true},
	{name: "triple raises max", cur: "4096\t131072\t6291456\n", want: 16777216, out: "4096 131072 16777216", change: true},
	{name: "triple already", cur: "4096\t131072\t16777216\n", want: 16777216},
	{name: "not a number", cur: "abc\n", want: 1, wantErr: true},
	{name: "pair", cur: "1 2\n", want: 1, wantErr: true},
	{name: "empty", cur: "", want: 1, wantErr: true},
}

func TestRaiseSysctl(t *testing.T) {
	t.Parallel()
	for _, tt := range raiseTests {
		t.Run(tt.name, func(t *testing.T) {
			out, change, err := raiseSysctl(tt.cur, tt.want, tt.exact)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if out != tt.out || change != tt.change {
				t.Errorf("got %q, %v; want %q, %v", out, change, tt.out, tt.change)
			}
		})
	}
}

func FuzzRaiseSysctl(f *testing.F) {
	for _, tt := range raiseTests {
		f.Add(tt.cur, tt.want, tt.exact)
	}
	f.Fuzz(func(t *testing.T, cur string, want int64, exact bool) {
		out, change, err := raiseSysctl(cur, want, exact)
		if err == nil && change && strings.ContainsAny(out, "\n\t") {
			t.Errorf("value %q would break the drop-in", out)
		}
	})
}

func TestValidSysctl(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"sunrpc.tcp_slot_table_entries": true, "net.ipv4.tcp_rmem": true, "net.ipv4.conf.eth-0.x": true,
		"": false, "sunrpc": false, "net..core": false, "../etc/passwd": false, "net.core/../x": false, "Net.core.x": false,
	} {
		if got := validSysctl(name); got != want {
			t.Errorf("validSysctl(%q) = %v, want %v", name, got, want)
		}
	}
}

var fstabTests = []struct {
	name, in   string
	ok         bool
	file, opts string
}{
	{name: "nfs", in: "srv:/x  /mnt/x  nfs4  rw,hard  0 0", ok: true, file: "/mnt/x", opts: "rw,hard"},
	{name: "tabs", in: "srv:/x\t/mnt/x\tnfs\tsoft\t0\t0", ok: true, file: "/mnt/x", opts: "soft"},
	{name: "escaped space", in: `srv:/x /mnt/with\040space nfs defaults`, ok: true, file: "/mnt/with space", opts: "defaults"},
	{name: "comment", in: "# srv:/x /mnt/x nfs rw 0 0"},
	{name: "indented comment", in: "   # note"},
	{name: "blank", in: "   "},
	{name: "too few fields", in: "srv:/x /mnt/x nfs"},
	{name: "bad escape kept", in: `srv:/x /mnt/a\9zz nfs rw`, ok: true, file: `/mnt/a\9zz`, opts: "rw"},
	{name: "escape at end", in: `srv:/x /mnt/a\04 nfs rw`, ok: true, file: `/mnt/a\04`, opts: "rw"},
}

func TestParseFstabLine(t *testing.T) {
	t.Parallel()
	for _, tt := range fstabTests {
		t.Run(tt.name, func(t *testing.T) {
			l := parseFstabLine(tt.in)
			if l.ok != tt.ok || l.file != tt.file || l.opts != tt.opts {
				t.Errorf("got ok=%v file=%q opts=%q", l.ok, l.file, l.opts)
			}
			if l.ok && tt.in[l.optStart:l.optEnd] != l.opts {
				t.Errorf("option span %d..%d does not hold the options", l.optStart, l.optEnd)
			}
		})
	}
}

func FuzzParseFstabLine(f *testing.F) {
	for _, tt := range fstabTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		l := parseFstabLine(in)
		if l.ok {
			// Rewriting the options with themselves gives the line back unchanged.
			if got := in[:l.optStart] + l.opts + in[l.optEnd:]; got != in {
				t.Errorf("round trip %q -> %q", in, got)
			}
		}
		inventory.UnescapeOctal(in)
	})
}

func TestMergeOptions(t *testing.T) {
	t.Parallel()
	ch := func(want ...string) []OptionChange {
		var out []OptionChange
		for _, w := range want {
			out = append(out, OptionChange{Want: w})
		}
		return out
	}
	tests := []struct {
		name, opts string
		changes    []OptionChange
		want       string
	}{
		{"soft to hard", "soft,rsize=65536,_netdev", ch("hard", "rsize=1048576"), "_netdev,hard,rsize=1048576"},
		{"defaults dropped", "defaults", ch("nconnect=4"), "nconnect=4"},
		{"actimeo replaces timers", "acregmin=1,acdirmax=5,noac,ro", ch("actimeo=30"), "ro,actimeo=30"},
		{"nfsvers replaced", "nfsvers=3,tcp", ch("vers=4.1", "proto=tcp"), "vers=4.1,proto=tcp"},
		{"unknown kept", "x-systemd.automount,fsc", ch("nocto"), "x-systemd.automount,fsc,nocto"},
	}
	for _, tt := range tests {
		if got := mergeOptions(tt.opts, tt.changes); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestOptionChanges(t *testing.T) {
	t.Parallel()
	m := &inventory.Mount{
		NConnect: 4, RSize: 1048576, WSize: 65536,
		Options: map[string]string{"vers": "4", "proto": "tcp6", "soft": "", "timeo": "600", "retrans": "2", "acregmin": "3"},
	}
	want := policy.MountOptions{Vers: "4.0", Proto: "tcp", NConnect: 8, RSize: 1048576, WSize: 1048576, Hard: boolp(true), Timeo: 600, Retrans: 3, ACTimeo: 3, NoCTO: true, Extra: []string{"noresvport", "sec=sys"}}
	got := policy.OptionChanges(m, want)
	wantChanges := []OptionChange{
		{Name: "nconnect", Have: "4", Want: "nconnect=8"},
		{Name: "wsize", Have: "65536", Want: "wsize=1048576"},
		{Name: "hard", Have: "soft", Want: "hard"},
		{Name: "retrans", Have: "2", Want: "retrans=3"},
		{Name: "actimeo", Have: "acregmin=3,acregmax=60,acdirmin=30,acdirmax=60", Want: "actimeo=3"},
		{Name: "nocto", Want: "nocto"},
		{Name: "noresvport", Want: "noresvport"},
		{Name: "sec", Want: "sec=sys"},
	}
	if diff := cmp.Diff(wantChanges, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzFstabEdit: the editor either writes a line that parses back to the same entry with
// the new options, or refuses; and it never refuses a policy-valid option on a one-line entry.
func FuzzFstabEdit(f *testing.F) {
	for _, tt := range fstabTests {
		f.Add(tt.in, "nconnect=4")
	}
	f.Add("srv:/e /mnt/x nfs4 rw,soft 0 0", "noresvport\nnfsvers=2")
	f.Add("srv:/e /mnt/x nfs4 rw 0 0", "a b")
	f.Add("srv:/e\t/mnt/with\\040space\tnfs\tdefaults\t0\t2", "hard")
	f.Fuzz(func(t *testing.T, in, opt string) {
		l := parseFstabLine(in)
		if !l.ok {
			return
		}
		merged := mergeOptions(l.opts, []OptionChange{{Want: opt}})
		line := l.text[:l.optStart] + merged + l.text[l.optEnd:]
		var want []string
		for _, sp := range fstabSpans(in) {
			want = append(want, in[sp.start:sp.end])
		}
		want[3] = merged
		err := checkFstabLine(line, want)
		if err != nil {
			if policy.ValidOption(opt) && !strings.Contains(in, "\n") {
				t.Fatalf("valid option %q refused on %q: %v", opt, in, err)
			}
			return
		}
		got := parseFstabLine(line)
		if strings.Contains(line, "\n") || !got.ok || got.spec != l.spec || got.file != l.file || got.vfstype != l.vfstype || got.opts != merged {
			t.Fatalf("accepted %q, which parses as %+v", line, got)
		}
	})
}
