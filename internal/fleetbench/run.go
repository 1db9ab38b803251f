package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nfstune/nfstune/internal/bench"
)

// Clients are the API groups the command uses.
type Clients struct {
	Core  corev1client.CoreV1Interface
	Batch batchv1client.BatchV1Interface
}

// Run creates the Job and its ConfigMap, waits for every pod to be ready, writes the
// start time, gathers each step from the pods' logs until the knee or the last rate, and
// deletes what it created, whatever happened (on cancellation of ctx too), waiting for the
// pods to go. The report holds the steps gathered so far, also with an error.
func Run(ctx context.Context, c Clients, o Options, progress io.Writer) (*Report, error) {
	o.defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	r := &runner{c: c, o: o, progress: progress, lines: map[int][]bench.FleetLine{}}
	r.report = newReport(&r.o)
	runErr := r.run(ctx)
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		r.report.Interrupted = true
	}
	cleanErr := r.cleanup(ctx)
	return r.report, errors.Join(runErr, cleanErr)
}

type runner struct {
	c        Clients
	o        Options
	progress io.Writer
	report   *Report
	// lines are each pod's lines by completion index, as last read.
	lines   map[int][]bench.FleetLine
	created bool
	// logErr is the last error reading a pod's log, printed once per pod and named when
	// a wait times out: a cluster whose API server cannot reach kubelet serves no pods/log.
	logErr    error
	logErrPod map[string]bool
	lastReady int
}

func (r *runner) printf(format string, args ...any) {
	fmt.Fprintf(r.progress, "kubectl nfstune bench: "+format+"\n", args...)
}

func (r *runner) run(ctx context.Context) error {
	o := &r.o
	if _, err := r.c.Core.ConfigMaps(o.Namespace).Create(ctx, ConfigMap(o), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ConfigMap %s/%s: %w", o.Namespace, o.Name, err)
	}
	r.created = true
	if _, err := r.c.Batch.Jobs(o.Namespace).Create(ctx, Job(o), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Job %s/%s: %w", o.Namespace, o.Name, err)
	}
	r.printf("Job %s/%s: %d pods on %d volumes, %d steps of %s", o.Namespace, o.Name, o.Pods, len(o.PVCs), len(o.Rates), o.period())

	readyBy := time.Now().Add(o.ReadyTimeout)
	r.lastReady = -1
	err := r.poll(ctx, readyBy, "every pod ready", func() (bool, error) {
		n := r.count(bench.FleetReady, 0)
		if n != r.lastReady {
			r.printf("%d of %d pods ready", n, o.Pods)
			r.lastReady = n
		}
		return n == o.Pods, nil
	})
	if err != nil {
		return err
	}
	// A whole second, rounded up, reads better in the ConfigMap and the logs.
	start := time.Now().Add(o.StartDelay).UTC().Truncate(time.Second).Add(time.Second)
	sched := bench.FleetSchedule{Start: start, Period: o.period()}
	cm := ConfigMap(o)
	cm.Data[startKey] = sched.Start.Format(time.RFC3339Nano)
	if _, err := r.c.Core.ConfigMaps(o.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the start time: %w", err)
	}
	r.report.Start = sched.Start
	r.printf("every pod ready; the first step starts at %s", sched.Start.Format(time.RFC3339))

	for i := range o.Rates {
		// A step is late once its period and one more have passed: each pod fails by
		// itself when it cannot start a step in time.
		by := sched.StepStart(i + 2)
		err := r.poll(ctx, by, fmt.Sprintf("step %d from every pod", i+1), func() (bool, error) {
			return r.count(bench.FleetStep, i+1) == o.Pods, nil
		})
		if err != nil {
			return err
		}
		s := aggregate(i+1, r.stepLines(i+1))
		r.report.add(s)
		r.report.withTuning(r.lines)
		r.printf("step %d: %s ops/s of %s offered, pods %s..%s, p99 up to %s ms", s.Step, num(s.OpsS), num(s.OfferedOpsS),
			num(s.Spread.Min), num(s.Spread.Max), num(s.P99ms))
		if r.report.Knee != nil {
			r.printf("knee at step %d (%s): stopping the pods", r.report.Knee.Step+1, r.report.Knee.Rule)
			return nil
		}
	}
	return nil
}

// poll reads the pods and their logs every o.Poll until done says so, a pod fails, the
// deadline passes or ctx ends.
func (r *runner) poll(ctx context.Context, deadline time.Time, what string, done func() (bool, error)) error {
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		if err := r.read(ctx); err != nil {
			return err
		}
		if ok, err := done(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("waiting for %s: not there by %s", what, deadline.UTC().Format(time.RFC3339))
			if r.logErr != nil {
				err = fmt.Errorf("%w; the last pod log could not be read: %w", err, r.logErr)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// read lists the Job's pods and reads each one's log; a failed pod fails the run with its
// error line.
func (r *runner) read(ctx context.Context) error {
	pods, err := r.c.Core.Pods(r.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: r.o.Selector()})
	if err != nil {
		return fmt.Errorf("listing the Job's pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodPending {
			continue
		}
		log, err := r.c.Core.Pods(r.o.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "bench"}).DoRaw(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.logErrPod == nil {
				r.logErrPod = map[string]bool{}
			}
			if !r.logErrPod[p.Name] {
				r.printf("reading pod %s's log: %v", p.Name, err)
				r.logErrPod[p.Name] = true
			}
			r.logErr = err
			continue
		}
		lines := bench.ParseFleetLines(string(log))
		for i := range lines {
			lines[i].Pod = p.Name
		}
		if len(lines) > 0 {
			r.lines[lines[0].Index] = lines
		}
		if p.Status.Phase == corev1.PodFailed {
			msg := "failed"
			if n := len(lines); n > 0 && lines[n-1].Event == bench.FleetError {
				msg = lines[n-1].Error
			}
			return fmt.Errorf("pod %s on %s: %s", p.Name, p.Spec.NodeName, msg)
		}
	}
	return nil
}

// count is how many pods wrote the event (for a step, that step's).
func (r *runner) count(ev bench.FleetEvent, step int) int {
	n := 0
	for _, lines := range r.lines {
		if slices.ContainsFunc(lines, func(l bench.FleetLine) bool { return l.Event == ev && l.Step == step }) {
			n++
		}
	}
	return n
}

func (r *runner) stepLines(step int) []bench.FleetLine {
	var out []bench.FleetLine
	for _, lines := range r.lines {
		for _, l := range lines {
			if l.Event == bench.FleetStep && l.Step == step {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// cleanup deletes the Job (foreground: its pods first), any pod left and the ConfigMap,
// and waits until no pod of the Job is left: each pod removes its directory as it ends.
func (r *runner) cleanup(ctx context.Context) error {
	if !r.created {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
	defer cancel()
	o := &r.o
	fg := metav1.DeletePropagationForeground
	var errs []error
	ignore := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if err := ignore(r.c.Batch.Jobs(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &fg})); err != nil {
		errs = append(errs, fmt.Errorf("deleting Job %s: %w", o.Name, err))
	}
	if err := r.c.Core.Pods(o.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: o.Selector()}); ignore(err) != nil {
		errs = append(errs, fmt.Errorf("deleting the Job's pods: %w", err))
	}
	if err := ignore(r.c.Core.ConfigMaps(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})); err != nil {
		errs = append(errs, fmt.Errorf("deleting ConfigMap %s: %w", o.Name, err))
	}
	r.printf("deleting Job %s; waiting for its pods to remove their directories and go", o.Name)
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		pods, err := r.c.Core.Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: o.Selector()})
		_, jobErr := r.c.Batch.Jobs(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err == nil && len(pods.Items) == 0 && apierrors.IsNotFound(jobErr) {
			r.printf("Job %s, its pods and ConfigMap are gone", o.Name)
			return errors.Join(errs...)
		}
		select {
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("the Job's pods are still there after %s: check with kubectl get pods -l %s", r.o.CleanupTimeout, o.Selector()))...)
		case <-t.C:
		}
	}
}
