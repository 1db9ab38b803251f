// Package bench measures NFS mounts with fio using built-in job profiles only, records
// the tuning state and a mountstats delta with every result, compares results with their
// spread, sweeps read-ahead and mount options, measures load curves (ops/s against response
// time on a rising load, curve.go), and renders reports with charts.
//
// Jobs are generated from the profiles in this file and never read from user files, since
// a fio job file can run programs (ioengine=exec). fio always runs inside a directory that
// bench creates on the mount and removes afterwards.
package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/fio"
)

// Job is one fio job of a profile. Each job runs as its own fio process, so files are
// reopened (and read-ahead re-read from the bdi) at every run.
type Job struct {
	// Name is the fio job name and the "job" of the result.
	Name string
	RW   string // fio rw=: read, write, randread, randwrite
	BS   string // block size, fio syntax
	// Engine is the fio ioengine.
	Engine  string
	IODepth int
	NumJobs int
	Direct  bool
	// NrFiles is the number of files per fio job (process).
	NrFiles int
	// FileBytes is a fixed file size; 0 means the --size of the run.
	FileBytes int64
	// FilenameFormat names the files; jobs with the same format share their files.
	FilenameFormat string
	// TimeBased repeats the workload for the whole runtime, after a ramp. Jobs that read
	// sequentially are not time based: a second pass would read from the page cache.
	TimeBased bool
	// Extra are further fixed fio options as name=value.
	Extra []string
}

// Profile is a named list of jobs with the source they reproduce.
type Profile struct {
	Name        string
	Description string
	// Source says where the job matrix comes from.
	Source string
	// ReadAheadSensitive marks profiles whose buffered reads depend on read_ahead_kb; a
	// sweep over read-ahead is only meaningful for them.
	ReadAheadSensitive bool
	Jobs               []Job
}

// Params are the run-time values applied to a profile's jobs.
type Params struct {
	// Dir is the directory fio creates its files in.
	Dir string
	// Size is the size of each data file in bytes.
	Size int64
	// Runtime caps each job; time-based jobs run for exactly this long after the ramp.
	Runtime time.Duration
	// Ramp is the warm-up of time-based jobs, excluded from the figures.
	Ramp time.Duration
}

// Defaults for bench run.
const (
	DefaultSize    = 1 << 30
	DefaultRuntime = 30 * time.Second
	DefaultRamp    = 5 * time.Second
	DefaultRepeat  = 3
)

// smallFileBytes is the size of the metadata profile's files: the 16 KiB files of the
// EDA front-end workload.
const smallFileBytes = 16 << 10

// Profiles returns the built-in profiles, sorted by name.
func Profiles() []Profile {
	ps := []Profile{
		azureFilesRandom(),
		{
			Name:        "blob-seq-write",
			Description: "sequential write, 32 KiB blocks, 4 jobs, direct and buffered",
			Source:      "Azure Blob NFS 3.0 fio tests (rw=write bs=32k numjobs=4)",
			Jobs: []Job{
				{Name: "seqwrite-32k-direct", RW: "write", BS: "32k", Engine: "libaio", IODepth: 1, NumJobs: 4, Direct: true, NrFiles: 1, FilenameFormat: "seqwrite.$jobnum"},
				// Buffered libaio submits synchronously, so psync is the honest engine; end_fsync
				// makes the figure include getting the data to the server.
				{Name: "seqwrite-32k-buffered", RW: "write", BS: "32k", Engine: "psync", IODepth: 1, NumJobs: 4, NrFiles: 1, FilenameFormat: "seqwrite.$jobnum", Extra: []string{"end_fsync=1"}},
			},
		},
		{
			Name:               "seq-read",
			Description:        "buffered sequential read, 64 KiB reads, page cache dropped before each run, no fadvise",
			Source:             "read-ahead guidance for SAS data steps and CAS loads on Azure Files and NetApp Files",
			ReadAheadSensitive: true,
			Jobs: []Job{
				{Name: "seqread-64k-buffered", RW: "read", BS: "64k", Engine: "psync", IODepth: 1, NumJobs: 1, NrFiles: 1, FilenameFormat: "seqread.$filenum", Extra: []string{"invalidate=1", "fadvise_hint=0"}},
			},
		},
		{
			Name:               "copy",
			Description:        "single-stream large-file copy: one buffered 1 MiB reader, then one buffered 1 MiB writer",
			Source:             "the dd/wget single-stream case",
			ReadAheadSensitive: true,
			Jobs: []Job{
				{Name: "copy-read-1m", RW: "read", BS: "1m", Engine: "psync", IODepth: 1, NumJobs: 1, NrFiles: 1, FilenameFormat: "copy.src", Extra: []string{"invalidate=1", "fadvise_hint=0"}},
				{Name: "copy-write-1m", RW: "write", BS: "1m", Engine: "psync", IODepth: 1, NumJobs: 1, NrFiles: 1, FilenameFormat: "copy.dst", Extra: []string{"fadvise_hint=0", "end_fsync=1"}},
			},
		},
		metadata(),
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}

func azureFilesRandom() Profile {
	p := Profile{
		Name:        "azure-files-random",
		Description: "random read and write at 4k, 8k, 64k and 1024k, iodepth 64, libaio, direct, 4 files",
		Source:      "Azure Files NFS performance guide fio matrix (nrfiles=4, iodepth=64, direct=1)",
	}
	for _, bs := range []string{"4k", "8k", "64k", "1024k"} {
		for _, rw := range []string{"randread", "randwrite"} {
			p.Jobs = append(p.Jobs, Job{
				Name: rw + "-" + bs, RW: rw, BS: bs, Engine: "libaio", IODepth: 64, NumJobs: 1,
				Direct: true, NrFiles: 4, FilenameFormat: "rand.$filenum", TimeBased: true,
			})
		}
	}
	return p
}

func metadata() Profile {
	const files = 1000
	common := func(name, engine string, extra ...string) Job {
		return Job{
			Name: name, Engine: engine, RW: "read", BS: "16k", IODepth: 1, NumJobs: 4, NrFiles: files,
			FileBytes: smallFileBytes, FilenameFormat: "md.$jobnum.$filenum",
			Extra: append([]string{"openfiles=1"}, extra...),
		}
	}
	return Profile{
		Name:        "metadata",
		Description: "create, stat, read and delete 4 x 1000 files of 16 KiB (small-file tool trees, the EDA front-end case)",
		Source:      "EDA front-end file mix (many 16 KiB files); an approximation, not a standard benchmark",
		Jobs: []Job{
			common("md-create", "filecreate"),
			common("md-stat", "filestat", "stat_type=stat"),
			common("md-read-16k", "psync", "invalidate=1"),
			common("md-delete", "filedelete"),
		},
	}
}

// LookupProfile returns the built-in profile called name.
func LookupProfile(name string) (Profile, error) {
	var names []string
	for _, p := range Profiles() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("unknown profile %q (want one of %s)", name, strings.Join(names, ", "))
}

// readsData reports whether j reads file contents, so that its files must exist before it
// is measured.
func (j Job) readsData() bool {
	return strings.Contains(j.RW, "read") && !fio.IsMetadataEngine(j.Engine)
}

// fileBytes is the size of each of j's files for p.
func (j Job) fileBytes(p Params) int64 {
	if j.FileBytes > 0 {
		return j.FileBytes
	}
	return p.Size
}

// Args returns fio's command line for j, without the program name. Every option is a
// job option (after --name), so results carry them per job.
func (j Job) Args(p Params) []string {
	return append([]string{"--output-format=json", "--eta=never"}, j.section(p)...)
}

// section is j's options from --name on: one job section of a fio command line, which
// fio runs alongside the other sections of the same command.
func (j Job) section(p Params) []string {
	args := []string{
		"--name=" + j.Name,
		"--directory=" + p.Dir,
		"--filename_format=" + j.FilenameFormat,
		"--ioengine=" + j.Engine,
		"--rw=" + j.RW,
		"--bs=" + j.BS,
		"--iodepth=" + strconv.Itoa(max(j.IODepth, 1)),
		"--numjobs=" + strconv.Itoa(max(j.NumJobs, 1)),
		"--nrfiles=" + strconv.Itoa(max(j.NrFiles, 1)),
		"--filesize=" + strconv.FormatInt(j.fileBytes(p), 10),
		"--direct=" + boolArg(j.Direct),
		"--group_reporting",
		"--lat_percentiles=1",
		"--runtime=" + strconv.Itoa(seconds(p.Runtime)),
	}
	if j.TimeBased {
		args = append(args, "--time_based", "--ramp_time="+strconv.Itoa(int((p.Ramp+time.Second-1)/time.Second)))
	}
	for _, e := range j.Extra {
		args = append(args, "--"+e)
	}
	return args
}

// Estimate is how long j is expected to take, for progress and ETA.
func (j Job) Estimate(p Params) time.Duration {
	if j.TimeBased {
		return p.Runtime + p.Ramp
	}
	return p.Runtime // a cap; sequential jobs usually end earlier
}

// SpaceNeeded is how many bytes p's files take at most: jobs with the same filename
// format share files.
func (pr Profile) SpaceNeeded(p Params) int64 {
	perFormat := map[string]int64{}
	for _, j := range pr.Jobs {
		n := int64(max(j.NrFiles, 1)) * int64(max(j.NumJobs, 1)) * j.fileBytes(p)
		if n > perFormat[j.FilenameFormat] {
			perFormat[j.FilenameFormat] = n
		}
	}
	var total int64
	for _, n := range perFormat {
		total += n
	}
	return total
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// ParseSize parses a size such as "4G", "512M", "1GiB" or "1073741824" into bytes,
// with binary multiples as fio uses them.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 || v > (1<<50)/mult {
		return 0, fmt.Errorf("invalid size %q: want a positive number with an optional K, M, G or T suffix", s)
	}
	return v * mult, nil
}
