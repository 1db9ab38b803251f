package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// SweepOptions are what bench sweep asks for.
type SweepOptions struct {
	RunOptions
	// ReadAheadKB are the read_ahead_kb values to try, set live through the bdi.
	ReadAheadKB []int
	// NConnect and RSize are mount option values to try; they need Remount.
	NConnect []int
	RSize    []int
	// Remount allows unmounting and mounting the target's client group.
	Remount bool
	// Remountable are the mount points nfstune may unmount and mount again. Every mount
	// of the target's client group must be listed, since nconnect belongs to the client.
	Remountable []string
	// ClientGoneTimeout bounds the wait for the kernel to drop the NFS client.
	ClientGoneTimeout time.Duration
}

// Variant is one tuning state of a sweep; zero fields are left as they are.
type Variant struct {
	Name        string `json:"name"`
	ReadAheadKB int    `json:"read_ahead_kb,omitempty"`
	NConnect    int    `json:"nconnect,omitempty"`
	RSize       int    `json:"rsize,omitempty"`
}

func (v Variant) mountKey() string { return fmt.Sprintf("%d/%d", v.NConnect, v.RSize) }

// Best is the best variant for one job.
type Best struct {
	Job     string `json:"job"`
	Metric  Metric `json:"metric"`
	Variant string `json:"variant"`
	Spread  Spread `json:"spread"`
	// Baseline is the variant closest to the tuning found at the start, and the verdict
	// of the best one against it.
	Baseline       string   `json:"baseline"`
	BaselineSpread Spread   `json:"baseline_spread"`
	ChangePct      *float64 `json:"change_pct,omitempty"`
	Verdict        string   `json:"verdict"`
}

// SweepResult is a Result whose runs carry variant names, plus the verdict.
type SweepResult struct {
	Result
	Variants []Variant `json:"variants"`
	Best     []Best    `json:"best"`
	// Policy is a policy YAML rule that applies the variant that won the most jobs.
	Policy string `json:"policy_snippet"`
}

// Variants lists the cartesian product of the values, mount options outermost so that
// each mount variant needs one remount.
func (o SweepOptions) Variants() []Variant {
	ras, ncs, rss := o.ReadAheadKB, o.NConnect, o.RSize
	if len(ras) == 0 {
		ras = []int{0}
	}
	if len(ncs) == 0 {
		ncs = []int{0}
	}
	if len(rss) == 0 {
		rss = []int{0}
	}
	var out []Variant
	for _, nc := range ncs {
		for _, rs := range rss {
			for _, ra := range ras {
				v := Variant{ReadAheadKB: ra, NConnect: nc, RSize: rs}
				var parts []string
				if ra > 0 {
					parts = append(parts, "ra="+strconv.Itoa(ra))
				}
				if nc > 0 {
					parts = append(parts, "nconnect="+strconv.Itoa(nc))
				}
				if rs > 0 {
					parts = append(parts, "rsize="+strconv.Itoa(rs))
				}
				v.Name = strings.Join(parts, ",")
				out = append(out, v)
			}
		}
	}
	return out
}

func (o SweepOptions) validate() error {
	var errs []error
	for _, ra := range o.ReadAheadKB {
		if ra < 4 || ra > 1<<20 {
			errs = append(errs, fmt.Errorf("read-ahead %d KiB out of range 4..1048576", ra))
		}
	}
	for _, n := range o.NConnect {
		if n < 1 || n > 16 {
			errs = append(errs, fmt.Errorf("nconnect %d out of range 1..16", n))
		}
	}
	for _, n := range o.RSize {
		if n < 4096 || n > 1<<20 || n%4096 != 0 {
			errs = append(errs, fmt.Errorf("rsize %d: want a multiple of 4096 up to 1048576", n))
		}
	}
	if len(o.ReadAheadKB)+len(o.NConnect)+len(o.RSize) == 0 {
		errs = append(errs, errors.New("nothing to sweep: give --readahead, --nconnect or --rsize"))
	}
	if (len(o.NConnect) > 0 || len(o.RSize) > 0) && !o.Remount {
		errs = append(errs, errors.New("--nconnect and --rsize variants need --remount: the mount is unmounted and mounted again"))
	}
	return errors.Join(errs...)
}

// Sweep runs the profile under every variant. Read-ahead is written to the bdi and
// restored at the end, even when interrupted; mount variants unmount every mount of the
// client group, wait until /proc/fs/nfsfs/servers no longer lists the client, and mount
// again with the variant; the original options are mounted again at the end.
func (r *Runner) Sweep(ctx context.Context, opts SweepOptions) (*SweepResult, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	prof, err := LookupProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	variants := opts.Variants()
	s, err := r.open(ctx, opts.RunOptions, prof, len(variants))
	if err != nil {
		return nil, err
	}
	var rm *remounter
	if len(opts.NConnect)+len(opts.RSize) > 0 {
		rm, err = r.newRemounter(s.target, opts)
		if err != nil {
			_, cerr := s.close(ctx, nil)
			return nil, errors.Join(err, cerr)
		}
	}
	if len(opts.ReadAheadKB) > 0 && !IsNFS(s.target.FSType) {
		// Read-ahead is only written to a confirmed NFS superblock; a local disk's bdi
		// would be changed without a journal to put it back after a crash.
		_, cerr := s.close(ctx, nil)
		return nil, errors.Join(fmt.Errorf("--readahead: %q is on %s, not NFS: read-ahead is only swept on NFS mounts: %w",
			s.target.Path, s.target.FSType, ErrNotNFS), cerr)
	}
	origRA, raErr := s.readAhead()
	if len(opts.ReadAheadKB) > 0 && raErr != nil {
		_, cerr := s.close(ctx, nil)
		return nil, errors.Join(raErr, cerr)
	}

	runErr := s.sweep(ctx, variants, rm)

	// Put everything back, whatever happened, with a context that is not cancelled.
	restoreCtx := context.WithoutCancel(ctx)
	var restoreErrs []error
	if rm != nil && rm.changed {
		if err := rm.apply(restoreCtx, Variant{}); err != nil {
			restoreErrs = append(restoreErrs, fmt.Errorf("mounting the original options again: %w", err))
		} else if err := s.retarget(); err != nil {
			restoreErrs = append(restoreErrs, err)
		}
	}
	if len(opts.ReadAheadKB) > 0 {
		if err := s.setReadAhead(origRA); err != nil {
			restoreErrs = append(restoreErrs, fmt.Errorf("restoring read_ahead_kb %d: %w", origRA, err))
		} else {
			r.logger().Info("read-ahead restored", "device", s.target.Device, "read_ahead_kb", origRA)
		}
	}
	res, err := s.close(ctx, errors.Join(append([]error{runErr}, restoreErrs...)...))
	out := &SweepResult{Result: *res, Variants: variants}
	out.Best = BestPerJob(&out.Result, variants, origRA, s.result.Tuning)
	out.Policy = PolicySnippet(s.profile.Name, s.target.MountPoint, out.Best, variants)
	return out, err
}

func (s *session) sweep(ctx context.Context, variants []Variant, rm *remounter) error {
	mounted := ""
	for _, v := range variants {
		if err := ctx.Err(); err != nil {
			return err
		}
		if rm != nil && v.mountKey() != mounted {
			if err := rm.apply(ctx, v); err != nil {
				return fmt.Errorf("mounting variant %s: %w", v.Name, err)
			}
			if err := s.retarget(); err != nil {
				return err
			}
			mounted = v.mountKey()
		}
		s.readAheadKB = v.ReadAheadKB
		if v.ReadAheadKB > 0 {
			if err := s.setReadAhead(v.ReadAheadKB); err != nil {
				return fmt.Errorf("variant %s: %w", v.Name, err)
			}
		}
		if err := s.runAll(ctx, v.Name); err != nil {
			return err
		}
	}
	return nil
}

// retarget resolves the mount again after a remount gave it a new superblock and device.
func (s *session) retarget() error {
	var inv *inventory.Inventory
	if s.r.Inventory != nil {
		var err error
		if inv, err = s.r.Inventory(); err != nil {
			return fmt.Errorf("reading NFS inventory after remount: %w", err)
		}
	}
	t, err := ResolveTarget(s.r.Root, inv, s.target.Path, s.opts.AllowNonNFS)
	if err != nil {
		return fmt.Errorf("after remount: %w", err)
	}
	s.target = t
	return nil
}

func (s *session) raPath() (string, error) {
	dir, err := s.r.Root.BDI(s.target.Device)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "read_ahead_kb"), nil
}

func (s *session) readAhead() (int, error) {
	p, err := s.raPath()
	if err != nil {
		return 0, err
	}
	v, err := hostfs.ReadInt(p)
	if err != nil {
		return 0, fmt.Errorf("reading %q: %w", p, err)
	}
	return int(v), nil
}

// checkReadAheadHeld fails a run whose read-ahead was changed by another writer while fio
// ran: its figures would be labelled with a value that did not hold.
func (s *session) checkReadAheadHeld(before *Tuning) error {
	if s.readAheadKB == 0 || before == nil || before.ReadAheadKB == nil {
		return nil
	}
	after, err := s.readAhead()
	if err != nil {
		return err
	}
	if after != *before.ReadAheadKB {
		return fmt.Errorf("read_ahead_kb of %s changed from %d to %d KiB during the run: another writer (udev's nfsrahead, nfstune agent) is tuning this mount; stop it for the sweep",
			s.target.Device, *before.ReadAheadKB, after)
	}
	return nil
}

// setReadAhead writes the bdi attribute in place through the guarded writer, after
// confirming again that the device is an NFS superblock. Files opened afterwards use the
// new value, and every fio run opens its files anew.
func (s *session) setReadAhead(kb int) error {
	if _, err := inventory.ConfirmNFS(s.r.Root, 0, s.target.Device); err != nil {
		return fmt.Errorf("setting read-ahead of %q: %w", s.target.MountPoint, err)
	}
	_, err := hostfs.SetReadAhead(s.r.Root, s.target.Device, kb)
	return err
}
