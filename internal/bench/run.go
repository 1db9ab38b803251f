package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// InventoryFunc reads the host's NFS inventory; production passes inventory.Read.
type InventoryFunc func() (*inventory.Inventory, error)

// DirPrefix starts the name of the directory bench creates on the mount.
const DirPrefix = ".nfstune-bench-"

// Runner runs profiles with fio. Its fields are the outside world: tests replace Exec
// with a fake fio and Inventory with a fixture.
type Runner struct {
	Root hostfs.Root
	// Exec runs fio (and, for sweeps, mount and umount).
	Exec fio.RunFunc
	// FioBin is the fio program, "fio" by default.
	FioBin    string
	Inventory InventoryFunc
	// Progress receives progress lines (stderr); nil discards them.
	Progress io.Writer
	// ProgressEvery is the interval of "still running" lines; 0 prints only a line per run.
	ProgressEvery time.Duration
	// DropCaches writes vm.drop_caches before each run; it needs root.
	DropCaches bool
	// Tool names the nfstune build for the provenance.
	Tool string
	// FSTimeout bounds statfs, mkdir and the final removal on the mount.
	FSTimeout time.Duration
	Logger    *slog.Logger
	// Now is time.Now unless a test sets it.
	Now func() time.Time
}

// RunOptions are what bench run asks for.
type RunOptions struct {
	// Mount is a directory on the mount to benchmark.
	Mount   string
	Profile string
	Repeat  int
	Size    int64
	Runtime time.Duration
	Ramp    time.Duration
	// AllowNonNFS lets bench run on a local file system (for a baseline or a test).
	AllowNonNFS bool
	// DirName names the directory created below Mount (one path element); empty for a
	// random DirPrefix name. A pod of a fleet curve names its own, so that the directory of
	// every pod is known before it runs.
	DirName string
}

func (o *RunOptions) defaults() {
	if o.Repeat <= 0 {
		o.Repeat = DefaultRepeat
	}
	if o.Size <= 0 {
		o.Size = DefaultSize
	}
	if o.Runtime <= 0 {
		o.Runtime = DefaultRuntime
	}
	if o.Ramp < 0 {
		o.Ramp = 0
	}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Runner) fioBin() string {
	if r.FioBin != "" {
		return r.FioBin
	}
	return "fio"
}

func (r *Runner) fsTimeout() time.Duration {
	if r.FSTimeout > 0 {
		return r.FSTimeout
	}
	return 30 * time.Second
}

// session is one benchmark directory on one mount, used by a run or a whole sweep.
type session struct {
	r       *Runner
	opts    RunOptions
	profile Profile
	params  Params
	target  Target
	result  *Result
	prog    *progress
	// readAheadKB is the read-ahead a sweep variant holds the target at (0: none). It is
	// written again right before each measured run and checked after it, since another
	// writer (udev's nfsrahead on a freshly mounted superblock) may write its own value
	// seconds after the sweep did.
	readAheadKB int
}

// Run runs every job of the profile Repeat times (the whole profile per repeat, so that
// the metadata jobs create before they delete) and returns the result. On cancellation
// the runs so far are returned with Provenance.Interrupted set, together with the error.
func (r *Runner) Run(ctx context.Context, opts RunOptions) (*Result, error) {
	prof, err := LookupProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	s, err := r.open(ctx, opts, prof, 1)
	if err != nil {
		return nil, err
	}
	runErr := s.runAll(ctx, "")
	return s.close(ctx, runErr)
}

// open checks the target, the free space and fio, and creates the bench directory.
// variants is how many times the profile will be run, for the ETA.
func (r *Runner) open(ctx context.Context, opts RunOptions, prof Profile, variants int) (*session, error) {
	opts.defaults()
	var inv *inventory.Inventory
	var err error
	if r.Inventory != nil {
		inv, err = r.Inventory()
		if err != nil {
			return nil, fmt.Errorf("reading NFS inventory: %w", err)
		}
	}
	target, err := ResolveTarget(r.Root, inv, opts.Mount, opts.AllowNonNFS)
	if err != nil {
		return nil, err
	}
	fioVersion, err := fio.Version(ctx, r.Exec, r.fioBin())
	if err != nil {
		return nil, fmt.Errorf("checking fio: %w", err)
	}
	params := Params{Size: opts.Size, Runtime: opts.Runtime, Ramp: opts.Ramp}
	need := prof.SpaceNeeded(params)
	free, err := FreeBytes(ctx, target.Path, r.fsTimeout())
	if err != nil {
		return nil, err
	}
	// Keep a margin of a tenth for fio's layout and the rest of the file system's users.
	if need+need/10 > int64(min(free, 1<<62)) {
		return nil, fmt.Errorf("not enough space on %q: profile %s needs %s (plus 10%%), %s free; lower --size",
			target.Path, prof.Name, humanBytes(need), humanBytes(int64(min(free, 1<<62))))
	}
	dir, err := r.makeDir(ctx, target, opts.DirName)
	if err != nil {
		return nil, err
	}
	params.Dir = dir
	s := &session{
		r: r, opts: opts, profile: prof, params: params, target: target,
		result: &Result{Provenance: Provenance{
			Tool:       r.Tool,
			Profile:    prof.Name,
			FioVersion: fioVersion,
			Kernel:     readKernel(r.Root, inv),
			Hostname:   readTrim(r.Root.Proc("sys", "kernel", "hostname")),
			Directory:  dir,
			SizeBytes:  params.Size,
			RuntimeS:   seconds(params.Runtime),
			RampS:      int(params.Ramp / time.Second),
			Repeat:     opts.Repeat,
			Started:    r.now(),
		}},
	}
	s.result.Tuning = s.tuning(inv)
	if r.DropCaches && os.Geteuid() != 0 {
		s.warn("not root: page cache is not dropped between runs, fio's invalidate=1 alone clears the files' cache")
	}
	var est time.Duration
	for _, j := range prof.Jobs {
		est += j.Estimate(params)
	}
	s.prog = newProgress(r.Progress, r.ProgressEvery, r.now, len(prof.Jobs)*opts.Repeat*variants, est*time.Duration(opts.Repeat*variants))
	r.logger().Info("bench directory created", "dir", dir, "profile", prof.Name, "fstype", target.FSType)
	return s, nil
}

// makeDir creates the bench directory name (a random one when empty) below t.Path on the
// target mount itself, never through a symbolic link or into another mount
// (mkdirOnMount), within the FS timeout. An existing directory of that name is an error:
// it is removed at the end, so it must be the run's own.
func (r *Runner) makeDir(ctx context.Context, t Target, name string) (string, error) {
	if name == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("naming bench directory: %w", err)
		}
		name = DirPrefix + hex.EncodeToString(b[:])
	} else if err := CheckDirName(name); err != nil {
		return "", err
	}
	var dir string
	err := withTimeout(ctx, r.fsTimeout(), "creating "+filepath.Join(t.Path, name), func() error {
		var err error
		dir, err = mkdirOnMount(t, name, 0o700)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("creating bench directory: %w", err)
	}
	return dir, nil
}

// CheckDirName checks that name is one path element a bench directory can be created as.
func CheckDirName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return fmt.Errorf("bench directory name %q: want one path element", name)
	}
	return nil
}

// close removes the bench directory, even when ctx is cancelled, and finishes the result.
func (s *session) close(ctx context.Context, runErr error) (*Result, error) {
	s.result.Provenance.Finished = s.r.now()
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		s.result.Provenance.Interrupted = true
	}
	cleanCtx := context.WithoutCancel(ctx)
	dir := s.params.Dir
	err := withTimeout(cleanCtx, 4*s.r.fsTimeout(), "removing "+dir, func() error { return os.RemoveAll(dir) })
	if err != nil {
		err = fmt.Errorf("removing bench directory: %w", err)
		s.warn(err.Error())
	} else {
		s.r.logger().Info("bench directory removed", "dir", dir)
	}
	return s.result, errors.Join(runErr, err)
}

func (s *session) warn(msg string) {
	s.result.Provenance.Warnings = append(s.result.Provenance.Warnings, msg)
	s.r.logger().Warn(msg)
}

// runAll runs the profile Repeat times under one variant label.
func (s *session) runAll(ctx context.Context, variant string) error {
	for rep := 1; rep <= s.opts.Repeat; rep++ {
		for _, j := range s.profile.Jobs {
			if err := ctx.Err(); err != nil {
				return err
			}
			run, err := s.runOne(ctx, j, rep, variant)
			if err != nil {
				return fmt.Errorf("job %s, repeat %d: %w", j.Name, rep, err)
			}
			s.result.Runs = append(s.result.Runs, run)
		}
	}
	return nil
}

func (s *session) runOne(ctx context.Context, j Job, rep int, variant string) (Run, error) {
	label := j.Name
	if variant != "" {
		label += " [" + variant + "]"
	}
	s.prog.begin(label, rep, s.opts.Repeat, j.Estimate(s.params))
	defer s.prog.end()

	if rep == 1 && j.readsData() {
		// Lay the files out (and fsync them) before the first measured read: pages still
		// dirty from a layout inside the measured run would survive the cache drop and be
		// read from memory.
		prep := append([]string{s.r.fioBin()}, j.Args(s.params)...)
		if _, err := s.r.Exec(ctx, prep[0], append(prep[1:], "--create_only=1")...); err != nil {
			return Run{}, fmt.Errorf("laying out files: %w", err)
		}
	}
	dropped := s.dropCaches()
	if s.readAheadKB > 0 {
		if err := s.setReadAhead(s.readAheadKB); err != nil {
			return Run{}, err
		}
	}
	inv, before := s.snapshot()
	run := Run{
		Profile:      s.profile.Name,
		Job:          j.Name,
		Variant:      variant,
		Repeat:       rep,
		CacheDropped: dropped,
		Command:      append([]string{s.r.fioBin()}, j.Args(s.params)...),
		Tuning:       s.tuning(inv),
		Started:      s.r.now(),
	}
	out, err := s.r.Exec(ctx, run.Command[0], run.Command[1:]...)
	run.ElapsedS = s.r.now().Sub(run.Started).Seconds()
	if err != nil {
		return run, err
	}
	if err := s.checkReadAheadHeld(run.Tuning); err != nil {
		return run, err
	}
	if _, err := recordFio(&run, out); err != nil {
		return run, err
	}
	if _, after := s.snapshot(); before != nil {
		run.Mountstats = DiffStats(before, after)
	}
	return run, nil
}

// recordFio parses fio's output into run's figures and returns the summary.
func recordFio(run *Run, out []byte) (fio.Summary, error) {
	parsed, err := fio.Parse(out)
	if err != nil {
		return fio.Summary{}, fmt.Errorf("parsing fio output: %w", err)
	}
	sum := fio.Summarize(parsed)
	if sum.Errors > 0 {
		return sum, fmt.Errorf("fio reported an error in %d of %d job entries", sum.Errors, sum.Entries)
	}
	const mib = 1 << 20
	run.ReadMiBs = round(sum.ReadBytesPerSec/mib, 3)
	run.WriteMiBs = round(sum.WriteBytesPerSec/mib, 3)
	run.ReadIOPS = round(sum.ReadIOPS, 1)
	run.WriteIOPS = round(sum.WriteIOPS, 1)
	run.LatP50ms = round(sum.LatP50NS/1e6, 4)
	run.LatP99ms = round(sum.LatP99NS/1e6, 4)
	run.LatMeanms = round(sum.LatMeanNS/1e6, 4)
	run.LatSource = sum.LatSource
	return sum, nil
}

// snapshot reads the inventory and returns it with the target's mountstats.
func (s *session) snapshot() (*inventory.Inventory, *inventory.Stats) {
	if s.r.Inventory == nil || s.target.NFS == nil {
		return nil, nil
	}
	inv, err := s.r.Inventory()
	if err != nil {
		s.r.logger().Warn("reading inventory for mountstats", "err", err)
		return nil, nil
	}
	m := FindMount(inv, s.target.Device)
	if m == nil {
		return inv, nil
	}
	return inv, m.Stats
}

// tuning describes the target now; inv may be nil.
func (s *session) tuning(inv *inventory.Inventory) *Tuning {
	if inv != nil && s.target.NFS != nil {
		if m := FindMount(inv, s.target.Device); m != nil {
			return TuningOf(m, s.target.MountPoint)
		}
	}
	if s.target.NFS != nil {
		return TuningOf(s.target.NFS, s.target.MountPoint)
	}
	t := &Tuning{MountPoint: s.target.MountPoint, FSType: s.target.FSType, Device: s.target.Device}
	if p, err := s.r.Root.BDI(s.target.Device); err == nil {
		if v, err := hostfs.ReadInt(filepath.Join(p, "read_ahead_kb")); err == nil {
			kb := int(v)
			t.ReadAheadKB = &kb
		}
	}
	return t
}

// dropCaches writes 3 to vm.drop_caches (page cache, dentries and inodes) so that a run
// reads from the server; it reports whether it did.
func (s *session) dropCaches() bool {
	if !s.r.DropCaches || os.Geteuid() != 0 {
		return false
	}
	p := s.r.Root.Proc("sys", "vm", "drop_caches")
	if err := os.WriteFile(p, []byte("3\n"), 0o644); err != nil {
		s.r.logger().Warn("dropping page cache", "path", p, "err", err)
		return false
	}
	return true
}

func readKernel(root hostfs.Root, inv *inventory.Inventory) string {
	if inv != nil && inv.KernelRelease != "" {
		return inv.KernelRelease
	}
	return readTrim(root.Proc("sys", "kernel", "osrelease"))
}

func readTrim(path string) string {
	s, err := hostfs.ReadString(path)
	if err != nil {
		return ""
	}
	return s
}
