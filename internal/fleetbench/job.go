// Package fleetbench draws one load curve with many clients: kubectl nfstune bench runs
// nfstune's load curve (bench curve) as an Indexed Job of pods spread across nodes, on one
// or more PersistentVolumeClaims, starts every step in every pod at once, reads each pod's
// results from its log, and adds them up into one report. On interruption or failure it
// deletes the Job, its pods and its ConfigMap, and waits for the pods to go: each pod
// removes its own directory when it ends, on SIGTERM too.
//
// The steps start together through time, not messages: once every pod has laid out its
// files (a "ready" line in its log), the command writes one start time into the
// ConfigMap the pods mount, and step i starts at that time plus i step periods in every
// pod. Kubelet delivers a mounted ConfigMap's change within its sync period (a minute by
// default, https://kubernetes.io/docs/concepts/configuration/configmap/#mounted-configmaps-are-updated-automatically),
// so the start lies --start-delay ahead. The pods need no API access (no service account
// token) and nothing outside Kubernetes schedules them; the nodes' clocks must agree, as
// NTP keeps them.
package fleetbench

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nfstune/nfstune/internal/bench"
)

// Labels and paths of the Job's pods.
const (
	// InstanceLabel carries the Job's name on the Job, its pods and its ConfigMap.
	InstanceLabel  = "app.kubernetes.io/instance"
	componentLabel = "app.kubernetes.io/component"
	nameLabel      = "app.kubernetes.io/name"
	// startDir is where the ConfigMap with the start time is mounted; startKey its file.
	startDir = "/etc/nfstune-bench"
	startKey = "start"
	// volumesDir holds the volumes, one directory per claim in the order named.
	volumesDir = "/volumes"
)

// Defaults of kubectl nfstune bench.
const (
	DefaultRunAsUser  = 65532
	DefaultStartDelay = 90 * time.Second
	DefaultStepGap    = 15 * time.Second
	// terminationGrace is how long a pod has after SIGTERM to stop fio and remove its
	// directory of small files from the server.
	terminationGrace = 300
)

// Options are what kubectl nfstune bench asks for.
type Options struct {
	Namespace string
	// Name is the Job's; empty for nfstune-bench-<random>.
	Name  string
	Image string
	// PVCs are the claims; pod i uses PVCs[i % len(PVCs)].
	PVCs []string
	// Dir is the directory below each volume's root the pods work in, each in
	// <Dir>/<job>-<index>.
	Dir  string
	Pods int
	// Profile is the curve's operation mix, one of bench.CurveProfiles.
	Profile string
	// Rates are each pod's offered loads in ops/s, rising: step i offers Pods x Rates[i].
	Rates        []int
	Runtime      time.Duration
	Ramp         time.Duration
	LatencyBound time.Duration
	// StepGap is a step period's time beyond the ramp and runtime: fio's start and stop.
	StepGap time.Duration
	// StartDelay is how far ahead of the moment every pod is ready the first step starts.
	StartDelay   time.Duration
	ReadyTimeout time.Duration
	RunAsUser    int64
	// Poll is the interval of the pods' listing and log reads.
	Poll           time.Duration
	CleanupTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Profile == "" {
		o.Profile = bench.CurveProfile
	}
	if len(o.Rates) == 0 {
		o.Rates = bench.DefaultCurveRates
	}
	if o.Runtime == 0 {
		o.Runtime = bench.DefaultCurveRuntime
	}
	if o.StepGap == 0 {
		o.StepGap = DefaultStepGap
	}
	if o.StartDelay == 0 {
		o.StartDelay = DefaultStartDelay
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 2 * time.Second
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = 2*time.Duration(terminationGrace)*time.Second + time.Minute
	}
	if o.Name == "" {
		o.Name = "nfstune-bench-" + strings.ToLower(rand.Text()[:5])
	}
}

// ErrNoDir is returned without --dir: the pods write and remove files, and only in a
// directory the user named for them.
var ErrNoDir = errors.New("--dir: name a subdirectory of the volumes for the pods' files (each pod works in <dir>/<job>-<index>)")

// Validate checks o after its defaults.
func (o *Options) Validate() error {
	var errs []error
	switch clean := filepath.Clean(o.Dir); {
	case o.Dir == "":
		errs = append(errs, ErrNoDir)
	case filepath.IsAbs(o.Dir) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
		errs = append(errs, fmt.Errorf("--dir %q: want a subdirectory of the volume, relative to its root", o.Dir))
	}
	if o.Image == "" {
		// The release image holds nfstune alone: no default would run.
		errs = append(errs, errors.New("--image: name an image with nfstune as its entrypoint and fio on its PATH (the release image has no fio)"))
	}
	if len(o.PVCs) == 0 {
		errs = append(errs, errors.New("--pvc: name at least one PersistentVolumeClaim"))
	}
	for _, p := range o.PVCs {
		if msgs := validation.IsDNS1123Subdomain(p); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--pvc %q: %s", p, strings.Join(msgs, "; ")))
		}
	}
	if o.Pods < 1 {
		errs = append(errs, fmt.Errorf("--pods %d: want at least 1", o.Pods))
	}
	// The Job's name is a label value, and <name>-<index> a pod's and a directory's name.
	if msgs := validation.IsDNS1123Label(o.Name + "-" + strconv.Itoa(max(o.Pods-1, 0))); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--name %q: %s", o.Name, strings.Join(msgs, "; ")))
	}
	if err := bench.CheckCurveProfile(o.Profile); err != nil {
		errs = append(errs, err)
	}
	for i, r := range o.Rates {
		if i > 0 && r <= o.Rates[i-1] {
			errs = append(errs, fmt.Errorf("--rates: %d after %d, want a rising load", r, o.Rates[i-1]))
		}
	}
	if len(o.Rates) < 2 {
		errs = append(errs, errors.New("--rates: want at least two offered loads"))
	}
	if o.Runtime < time.Second || o.Ramp < 0 || o.StepGap < time.Second || o.StartDelay < 0 {
		errs = append(errs, errors.New("--runtime and --step-gap: want at least 1s; --ramp and --start-delay not negative"))
	}
	if o.RunAsUser < 1 {
		errs = append(errs, fmt.Errorf("--run-as-user %d: want a user other than root", o.RunAsUser))
	}
	return errors.Join(errs...)
}

// period is the time from one step's start to the next's.
func (o *Options) period() time.Duration { return o.Ramp + o.Runtime + o.StepGap }

func (o *Options) labels() map[string]string {
	return map[string]string{nameLabel: "nfstune", componentLabel: "bench", InstanceLabel: o.Name}
}

// Selector selects the Job's pods.
func (o *Options) Selector() string { return InstanceLabel + "=" + o.Name }

// ConfigMap is the start time's ConfigMap, empty until every pod is ready.
func ConfigMap(o *Options) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.labels()},
		Data:       map[string]string{startKey: ""},
	}
}

// Job is the Indexed Job of o.Pods pods, all running at once, spread over the nodes, each
// with every claim mounted (a pod template cannot vary by index) and using the one of its
// index. The pods run as a user other than root with no capabilities, no privilege
// escalation, RuntimeDefault seccomp, a read-only root, no host path and no API token.
func Job(o *Options) *batchv1.Job {
	n := int32(o.Pods)
	indexed := batchv1.IndexedCompletion
	grace := int64(terminationGrace)
	args := []string{
		"bench", "curve-pod",
		"--dir=" + o.Dir,
		"--job=" + o.Name,
		"--profile=" + o.Profile,
		"--start-file=" + filepath.Join(startDir, startKey),
		"--step-period=" + o.period().String(),
		"--rates=" + joinInts(o.Rates),
		"--runtime=" + o.Runtime.String(),
		"--ramp=" + o.Ramp.String(),
		"--start-timeout=" + (o.ReadyTimeout + o.StartDelay + 5*time.Minute).String(),
	}
	var mounts []string
	volumes := []corev1.Volume{
		{Name: "start", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.Name}}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	vms := []corev1.VolumeMount{{Name: "start", MountPath: startDir, ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}}
	for i, pvc := range o.PVCs {
		name := "volume-" + strconv.Itoa(i)
		path := volumesDir + "/" + strconv.Itoa(i)
		mounts = append(mounts, path)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}})
		vms = append(vms, corev1.VolumeMount{Name: name, MountPath: path})
	}
	args = append(args, "--mounts="+strings.Join(mounts, ","), "--volumes="+strings.Join(o.PVCs, ","))
	uid := o.RunAsUser
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.labels()},
		Spec: batchv1.JobSpec{
			CompletionMode: &indexed,
			Completions:    &n,
			Parallelism:    &n,
			// A pod that fails fails the curve: a replacement would start its steps
			// out of time with the others.
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: o.labels()},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					AutomountServiceAccountToken:  new(false),
					EnableServiceLinks:            new(false),
					TerminationGracePeriodSeconds: &grace,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   new(true),
						RunAsUser:      &uid,
						RunAsGroup:     &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelHostname,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{InstanceLabel: o.Name}},
					}},
					Containers: []corev1.Container{{
						Name:  "bench",
						Image: o.Image,
						Args:  args,
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						VolumeMounts: vms,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: new(false),
							ReadOnlyRootFilesystem:   new(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
