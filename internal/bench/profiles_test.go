package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/fio"
)

func argMap(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		m[k] = v
	}
	return m
}

func TestProfilesAreSafeAndValid(t *testing.T) {
	t.Parallel()
	p := Params{Dir: "/mnt/nfs/.nfstune-bench-x", Size: 1 << 30, Runtime: 30 * time.Second, Ramp: 5 * time.Second}
	seen := map[string]bool{}
	for _, prof := range Profiles() {
		if len(prof.Jobs) == 0 || prof.Source == "" || prof.Description == "" {
			t.Errorf("profile %s incomplete", prof.Name)
		}
		if strings.Contains(strings.ToUpper(prof.Name+prof.Description+prof.Source), "SPEC") {
			t.Errorf("profile %s mentions SPEC", prof.Name)
		}
		for _, j := range prof.Jobs {
			if seen[j.Name] {
				t.Errorf("job name %s used twice", j.Name)
			}
			seen[j.Name] = true
			// fio treats any job whose name starts with "global" as the global section.
			if strings.HasPrefix(j.Name, "global") {
				t.Errorf("job %s would be read as fio's global section", j.Name)
			}
			m := argMap(j.Args(p))
			if m["directory"] != p.Dir || strings.Contains(m["filename_format"], "/") {
				t.Errorf("job %s writes outside the bench directory: %v", j.Name, m)
			}
			for _, banned := range []string{"gtod_reduce", "exec", "program", "filename", "status-interval"} {
				if _, ok := m[banned]; ok || m["ioengine"] == banned {
					t.Errorf("job %s uses %s", j.Name, banned)
				}
			}
			if m["output-format"] != "json" || m["lat_percentiles"] != "1" {
				t.Errorf("job %s: output-format %q lat_percentiles %q", j.Name, m["output-format"], m["lat_percentiles"])
			}
			// Buffered libaio degrades to synchronous submission.
			if m["ioengine"] == "libaio" && m["direct"] != "1" {
				t.Errorf("job %s: buffered libaio", j.Name)
			}
			_, timeBased := m["time_based"]
			if m["rw"] == "read" && timeBased {
				t.Errorf("job %s: time-based sequential read would re-read cached data", j.Name)
			}
		}
		if prof.ReadAheadSensitive {
			for _, j := range prof.Jobs {
				m := argMap(j.Args(p))
				if m["rw"] == "read" && (m["direct"] != "0" || m["fadvise_hint"] != "0" || m["invalidate"] != "1") {
					t.Errorf("read-ahead job %s: direct=%s fadvise_hint=%s invalidate=%s", j.Name, m["direct"], m["fadvise_hint"], m["invalidate"])
				}
			}
		}
	}
}

func TestAzureFilesMatrix(t *testing.T) {
	t.Parallel()
	prof, err := LookupProfile("azure-files-random")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range prof.Jobs {
		m := argMap(j.Args(Params{Dir: "/d", Size: 4 << 30, Runtime: time.Minute}))
		got = append(got, m["rw"]+"/"+m["bs"])
		if m["iodepth"] != "64" || m["ioengine"] != "libaio" || m["direct"] != "1" || m["nrfiles"] != "4" || m["filesize"] != strconv.Itoa(4<<30) {
			t.Errorf("job %s: %v", j.Name, m)
		}
	}
	want := "randread/4k randwrite/4k randread/8k randwrite/8k randread/64k randwrite/64k randread/1024k randwrite/1024k"
	if strings.Join(got, " ") != want {
		t.Errorf("matrix = %v\nwant %s", got, want)
	}
	if n := prof.SpaceNeeded(Params{Size: 1 << 30}); n != 4<<30 {
		t.Errorf("space = %d, want 4 GiB (the 8 jobs share 4 files)", n)
	}
}

// TestRecordedOutputsMatchProfiles keeps testdata/fio honest: each file is fio's answer
// to the arguments the profile generates today.
func TestRecordedOutputsMatchProfiles(t *testing.T) {
	t.Parallel()
	for _, prof := range Profiles() {
		for _, j := range prof.Jobs {
			b, err := os.ReadFile(filepath.Join("testdata", "fio", j.Name+".json"))
			if err != nil {
				t.Errorf("no recorded output for %s/%s: %v", prof.Name, j.Name, err)
				continue
			}
			o, err := fio.Parse(b)
			if err != nil {
				t.Errorf("%s: %v", j.Name, err)
				continue
			}
			want := argMap(j.Args(Params{Dir: "x", Size: 1, Runtime: time.Second}))
			for _, k := range []string{"rw", "bs", "ioengine", "iodepth", "numjobs", "nrfiles", "direct", "filename_format"} {
				if got, _ := o.Option(&o.Jobs[0], k); got != want[k] {
					t.Errorf("%s: recorded %s=%q, profile has %q", j.Name, k, got, want[k])
				}
			}
			s := fio.Summarize(o)
			if s.ReadIOPS+s.WriteIOPS <= 0 || s.LatP99NS <= 0 {
				t.Errorf("%s: recorded output gives no operations or latency: %+v", j.Name, s)
			}
		}
	}
}

var sizeTests = []struct {
	in   string
	want int64
	err  bool
}{
	{in: "1G", want: 1 << 30},
	{in: "512m", want: 512 << 20},
	{in: "4GiB", want: 4 << 30},
	{in: "16k", want: 16 << 10},
	{in: "1073741824", want: 1 << 30},
	{in: "2T", want: 2 << 40},
	{in: "", err: true},
	{in: "0", err: true},
	{in: "-1G", err: true},
	{in: "1.5G", err: true},
	{in: "G", err: true},
	{in: "9999999T", err: true},
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tt := range sizeTests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, tt := range sizeTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n <= 0 {
			t.Errorf("ParseSize(%q) = %d", s, n)
		}
	})
}
