package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/render"
	"github.com/nfstune/nfstune/internal/version"
)

// manifestFormats are the formats of k8s render and k8s volume: Kubernetes manifests, for
// kubectl apply, have no table.
var manifestFormats = []string{OutputYAML, OutputJSON}

func newK8sCommand(g *globals, streams IOStreams) *cobra.Command {
	c := &cobra.Command{
		Use:   "k8s",
		Short: "Render Kubernetes manifests for the node agent, the node installer and NFS volumes",
	}
	c.AddCommand(
		newK8sRenderCommand(streams),
		newK8sVolumeCommand(streams),
		newK8sPauseCommand(),
		newK8sInstallNodeCommand(g, streams),
		newK8sRevertNodeCommand(g, streams),
	)
	return c
}

type k8sRenderFlags struct {
	Config      string
	Namespace   string
	Image       string
	ImageDigest string
	Mode        string
	Output      string
	// ProxyHelpers is agent.proxyHelpers.enabled.
	ProxyHelpers bool
}

func newK8sRenderCommand(streams IOStreams) *cobra.Command {
	flags := &k8sRenderFlags{}
	c := &cobra.Command{
		Use:   "render",
		Short: "Render the nfstune DaemonSet and its Namespace, ServiceAccount, ConfigMap and Service",
		Long: `render prints the objects that run nfstune on every selected node, in apply order.

--config reads a values file with the keys of the Helm chart's values.yaml
(deploy/helm/nfstune), so that both produce the same objects. Flags override the file.

Mode agent runs "nfstune agent" (not privileged, all capabilities dropped, read-only root
filesystem; the host's /proc and /sys read-only, /sys for the sunrpc transports unless
agent.hostSys is false, and its bdi directory, writable only with agent.policyMode:
enforce). agent.blockedProcesses adds CAP_SYS_PTRACE, so that the agent names the processes
blocked on a server that stopped answering. --proxy-helpers (agent.proxyHelpers) also mounts, read-only,
the state of efs-utils and AZNFS, so that mounts through their local proxies are
attributed to EFS and Azure Files. Mode installer copies nfstune's udev rule and binary onto each
node from an init container, and renders a DaemonSet that logs each node's read-ahead. Mode
revert undoes installer mode on each node from an init container ("nfstune k8s revert-node":
the rule, the nfsmount.conf drop-in, the binary and the policy); delete its objects once
every node's pod runs.`,
		Example: `  nfstune k8s render | kubectl apply -f -
  nfstune k8s render --config values.yaml --image-digest sha256:... -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runK8sRender(c, streams, flags)
		},
	}
	c.Flags().StringVar(&flags.Config, "config", "", "values file (the Helm chart's keys), or - for stdin")
	c.Flags().StringVar(&flags.Namespace, "namespace", "", "namespace for every object (default nfstune)")
	c.Flags().StringVar(&flags.Image, "image", "", "image repository, optionally with :tag (default "+render.DefaultRepository+":"+version.Version+")")
	c.Flags().StringVar(&flags.ImageDigest, "image-digest", "", "pin the image by digest: sha256:<hex>")
	c.Flags().StringVar(&flags.Mode, "mode", "", "agent, installer, or revert (undoes installer) (default agent)")
	c.Flags().BoolVar(&flags.ProxyHelpers, "proxy-helpers", false, "mount the NFS proxy helpers' state read-only (agent.proxyHelpers.enabled)")
	addOutputFlag(c, &flags.Output, manifestFormats, "")
	return c
}

func runK8sRender(c *cobra.Command, streams IOStreams, flags *k8sRenderFlags) error {
	var raw []byte
	if flags.Config != "" {
		b, err := readConfig(streams.In, flags.Config)
		if err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
		raw = b
	}
	v, err := render.LoadValues(configName(flags.Config), raw)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	set := c.Flags().Changed
	if set("namespace") {
		v.Namespace = flags.Namespace
	}
	if set("mode") {
		v.Mode = flags.Mode
	}
	if set("image") {
		v.Image.Repository, v.Image.Tag = splitImage(flags.Image)
	}
	if set("image-digest") {
		v.Image.Digest = flags.ImageDigest
	}
	if set("proxy-helpers") {
		v.Agent.ProxyHelpers.Enabled = flags.ProxyHelpers
	}
	objs, err := render.Render(v, version.Version)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("rendering manifests: %w", err)}
	}
	return render.Write(streams.Out, flags.Output, objs)
}

// readConfig reads a file, or stdin for "-", of at most hostfs.MaxConfigSize bytes.
func readConfig(in io.Reader, name string) ([]byte, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(in, hostfs.MaxConfigSize+1))
		if err == nil && len(b) > hostfs.MaxConfigSize {
			err = fmt.Errorf("stdin: %w: larger than %d bytes", hostfs.ErrTooLarge, hostfs.MaxConfigSize)
		}
	} else {
		b, err = hostfs.ReadFile(name, hostfs.MaxConfigSize)
	}
	if err != nil {
		return nil, fmt.Errorf("reading values: %w", err)
	}
	return b, nil
}

func configName(name string) string {
	if name == "" {
		return "default values"
	}
	if name == "-" {
		return "stdin"
	}
	return name
}

// splitImage splits "registry:5000/repo:tag" into repository and tag; the tag is empty
// when the reference has none. A digest belongs in --image-digest.
func splitImage(ref string) (repo, tag string) {
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}

func newK8sPauseCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Block until terminated; keeps installer and validation pods running without a second image",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(c *cobra.Command, _ []string) error {
			return pause(c.Context())
		},
	}
}

// pause returns when ctx ends: app.Main cancels it on SIGTERM and SIGINT.
func pause(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

type k8sVolumeFlags struct {
	Backend   string
	Workload  string
	Driver    string
	Static    bool
	Dynamic   bool
	Server    string
	Export    string
	Size      string
	Name      string
	Namespace string
	Output    string
}

func newK8sVolumeCommand(streams IOStreams) *cobra.Command {
	flags := &k8sVolumeFlags{}
	c := &cobra.Command{
		Use:   "volume",
		Short: "Render a PersistentVolume and claim, or a StorageClass, with a profile's mount options",
		Long: `volume renders the objects for an NFS volume whose mount options come from the built-in
profile for --backend and --workload: a StorageClass that provisions shares (the default, or
--dynamic), or a PersistentVolume bound to a PersistentVolumeClaim for an existing share
(--static). The driver defaults to the backend's own: azurefile-csi for azure-files, blob-csi
for azure-blob-nfs, nfs-csi for the others; --driver overrides it.

Options the driver forces, drops or adds are left out or reported on stderr: azurefile-csi
always mounts vers=4,minorversion=1,sec=sys and adds noresvport and actimeo=30; blob-csi
mounts sec=sys,vers=3,nolock. Read-ahead is not a mount option: the agent or the installer
sets it. Pod inline nfs volumes cannot carry mount options, so use the claim.`,
		Example: `  nfstune k8s volume --backend azure-files --workload sequential-read
  nfstune k8s volume --backend azure-files --workload sequential-read \
      --static --server acct.file.core.windows.net --export /acct/saswork --size 1Ti
  nfstune k8s volume --backend generic --workload static-tools --driver nfs-csi --dynamic \
      --server nfs.example.com --export /tools`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runK8sVolume(streams, flags)
		},
	}
	f := c.Flags()
	addBackendFlag(c, &flags.Backend, "backend", "backend profile: "+backendNames())
	f.StringVar(&flags.Workload, "workload", policy.WorkloadGeneral, "workload profile: "+strings.Join(policy.Workloads(), ", "))
	f.StringVar(&flags.Driver, "driver", "", "volume driver: "+strings.Join(render.Drivers(), ", ")+" (default: the backend's)")
	f.BoolVar(&flags.Static, "static", false, "PersistentVolume and claim for an existing share")
	f.BoolVar(&flags.Dynamic, "dynamic", false, "StorageClass that provisions shares (the default)")
	f.StringVar(&flags.Server, "server", "", "NFS server or storage account endpoint (efs-csi: the file system ID; filestore-csi: the instance's IP address)")
	f.StringVar(&flags.Export, "export", "", "exported path, e.g. /<account>/<share> on Azure")
	deprecatedAlias(c, "share", "export")
	f.StringVar(&flags.Size, "size", "100Gi", "capacity of a static volume")
	f.StringVar(&flags.Name, "name", "", "object name (default <backend>-<workload>)")
	f.StringVar(&flags.Namespace, "namespace", "default", "namespace of the claim")
	addOutputFlag(c, &flags.Output, manifestFormats, "")
	return c
}

func runK8sVolume(streams IOStreams, flags *k8sVolumeFlags) error {
	if flags.Static && flags.Dynamic {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("give at most one of --static and --dynamic")}
	}
	if flags.Backend == "" {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--backend is required")}
	}
	driver := flags.Driver
	if driver == "" {
		driver = backendDriver(flags.Backend)
	}
	prof, err := policy.Default().Profile(flags.Backend, flags.Workload)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	name := flags.Name
	if name == "" {
		name = flags.Backend + "-" + flags.Workload
	}
	objs, warnings, err := render.Volume(render.VolumeSpec{
		Name:        name,
		Namespace:   flags.Namespace,
		Driver:      driver,
		Static:      flags.Static,
		Server:      flags.Server,
		Export:      flags.Export,
		Size:        flags.Size,
		Options:     prof.Mount.List(),
		ReadAheadKB: prof.ReadAheadFor(0), // a target derived from rsize assumes the profile rsize, else 1 MiB
	})
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("rendering volume: %w", err)}
	}
	if want := driverBackend(driver); want != "" && want != flags.Backend {
		warnings = append(warnings, fmt.Sprintf("%s serves the %s backend, not %s: the profile may not fit", driver, want, flags.Backend))
	}
	for _, w := range warnings {
		fmt.Fprintf(streams.ErrOut, "warning: %s\n", display.Text(w))
	}
	return render.Write(streams.Out, flags.Output, objs)
}

// serviceDrivers pair each cloud storage service with its own CSI driver.
var serviceDrivers = []struct{ backend, driver string }{
	{policy.BackendAzureFiles, render.DriverAzureFile},
	{policy.BackendAzureBlobNFS, render.DriverBlob},
	{policy.BackendAWSEFS, render.DriverEFS},
	{policy.BackendGCPFilestore, render.DriverFilestore},
}

// backendDriver is the driver a backend's volumes use unless --driver says otherwise: the
// service's own CSI driver, csi-driver-nfs for any other NFS server.
func backendDriver(backend string) string {
	for _, p := range serviceDrivers {
		if p.backend == backend {
			return p.driver
		}
	}
	return render.DriverNFS
}

// driverBackend is the backend a service's driver mounts, empty for the generic drivers.
func driverBackend(driver string) string {
	for _, p := range serviceDrivers {
		if p.driver == driver {
			return p.backend
		}
	}
	return ""
}
