package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestOptionsCommand(t *testing.T) {
	t.Parallel()
	cfg := writeTempFile(t, "policy.yaml", `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {cidr: 10.20.0.0/16}
    backend: azure-netapp-files
    workload: static-tools
    mountOptions: {nconnect: 4}
`)
	fixed := writeTempFile(t, "fixed.yaml", "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults: {readAheadAdaptive: false}\n")
	tests := []struct {
		name string
		args []string
		code int
		want string // whole stdout, or a substring of stderr when code != 0
	}{
		{
			name: "mount options",
			args: []string{"options", "--backend", "azure-files", "--workload", "sequential-read"},
			want: "-o vers=4.1,proto=tcp,nconnect=4,rsize=1048576,wsize=1048576,hard,actimeo=30,noresvport,sec=sys\n",
		},
		{
			name: "mount command",
			args: []string{"options", "--backend", "aws-efs", "--server", "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "--export", "/", "--mountpoint", "/mnt/my efs"},
			want: "mount -t nfs -o vers=4.1,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport fs-0123456789abcdef0.efs.us-east-1.amazonaws.com:/ '/mnt/my efs'\n",
		},
		{
			name: "backend detected from the server name",
			args: []string{"options", "--server", "acct.blob.core.windows.net", "-o", "fstab", "--export", "/acct/c", "--mountpoint", "/blob"},
			want: "# nfstune azure-blob-nfs/general (built-in)\n" +
				"# read_ahead_kb is adaptive, 1024 to 16384, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"acct.blob.core.windows.net:/acct/c /blob nfs vers=3,proto=tcp,rsize=1048576,wsize=1048576,hard,retrans=6,nolock,sec=sys 0 0\n",
		},
		{
			name: "fstab with placeholders",
			args: []string{"options", "--backend", "generic", "-o", "fstab"},
			want: "# nfstune generic/general (built-in)\n" +
				"# read_ahead_kb is adaptive, 1024 to 15360, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"<server>:<export> <mountpoint> nfs proto=tcp,hard 0 0\n",
		},
		{
			name: "fixed read-ahead, derived from rsize",
			args: []string{"options", "--config", fixed, "--backend", "generic", "-o", "fstab"},
			want: "# nfstune generic/general (built-in)\n" +
				"# read_ahead_kb 15 x rsize (15360 at rsize 1024 KiB) is not a mount option: nfstune apply sets it with a udev rule\n" +
				"<server>:<export> <mountpoint> nfs proto=tcp,hard 0 0\n",
		},
		{
			name: "config rule by address",
			args: []string{"options", "--config", cfg, "--server", "10.20.1.5", "--export", "/tools", "--mountpoint", "/tools", "-o", "fstab"},
			want: "# nfstune azure-netapp-files/static-tools (policy.yaml rule 1)\n" +
				"# read_ahead_kb is adaptive, 1024 to 15360, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"10.20.1.5:/tools /tools nfs vers=3,proto=tcp,nconnect=4,rsize=262144,wsize=262144,hard,timeo=600,actimeo=600,nocto 0 0\n",
		},
		{
			name: "nfsmount.conf server section",
			args: []string{"options", "--backend", "azure-netapp-files", "--workload", "static-tools", "-o", "nfsmount.conf", "--server", "10.20.1.5"},
			want: "# nfstune azure-netapp-files/static-tools (built-in)\n" +
				"# read_ahead_kb is adaptive, 1024 to 15360, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"[ Server \"10.20.1.5\" ]\nNfsvers=3\nProto=tcp\nNconnect=8\nRsize=262144\nWsize=262144\nHard=True\nTimeo=600\nActimeo=600\nCto=False\n",
		},
		{
			name: "nfsmount.conf global",
			args: []string{"options", "--backend", "azure-blob-nfs", "-o", "nfsmount.conf"},
			want: "# nfstune azure-blob-nfs/general (built-in)\n" +
				"# read_ahead_kb is adaptive, 1024 to 16384, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"[ NFSMount_Global_Options ]\nNfsvers=3\nProto=tcp\nRsize=1048576\nWsize=1048576\nHard=True\nRetrans=6\nLock=False\nSec=sys\n",
		},
		{name: "ipv6 server", args: []string{"options", "--server", "fd00::5", "--export", "/e", "--mountpoint", "/m", "-o", "fstab"},
			want: "# nfstune generic/general (built-in)\n" +
				"# read_ahead_kb is adaptive, 1024 to 15360, and not a mount option: nfstune apply sets the floor with a udev rule, the nfstune agent moves it\n" +
				"[fd00::5]:/e /m nfs proto=tcp,hard 0 0\n"},
		{name: "unknown backend", args: []string{"options", "--backend", "ontap"}, code: ExitError2, want: `invalid argument "ontap" for "--backend" flag: unknown backend: want one of azure-files (afs, azurefiles),`},
		{name: "unknown workload", args: []string{"options", "--workload", "batch"}, code: ExitError2, want: "unknown --workload"},
		{name: "unknown format", args: []string{"options", "-o", "table"}, code: ExitError2, want: `invalid argument "table" for "-o, --output" flag: want mount, fstab, nfsmount.conf, json, yaml`},
		{name: "relative mount point", args: []string{"options", "--mountpoint", "mnt"}, code: ExitError2, want: "absolute path"},
		{name: "server with a whole fstab line", code: ExitError2, want: "not a host name or an IP address",
			args: []string{"options", "-o", "fstab", "--server", "srv:/x /mnt nfs sec=none 0 0\nsrv", "--export", "/e", "--mountpoint", "/m"}},
		{name: "server with an nfsmount.conf section", code: ExitError2, want: "not a host name or an IP address",
			args: []string{"options", "-o", "nfsmount.conf", "--server", "srv\" ]\n[ NFSMount_Global_Options ]\nSec=none\n[ Server \"x"}},
		{name: "server with an option", code: ExitError2, want: "not a host name or an IP address", args: []string{"options", "--server", "srv,sec=none"}},
		{name: "mount point closing the nfsmount.conf section", code: ExitError2, want: "--mountpoint",
			args: []string{"options", "-o", "nfsmount.conf", "--mountpoint", "/m\" ]\nSec=none\n[ MountPoint \"/m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runVerb(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.code != ExitOK {
				if !strings.Contains(stderr, tt.want) {
					t.Errorf("stderr lacks %q: %s", tt.want, stderr)
				}
				return
			}
			if stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
		})
	}
}

func TestNFSMountConfLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"vers=4.1":   "Nfsvers=4.1",
		"hard":       "Hard=True",
		"soft":       "Soft=True",
		"nocto":      "Cto=False",
		"noresvport": "Resvport=False",
		"sec=sys":    "Sec=sys",
		"rdirplus":   "Rdirplus=True",
	} {
		if got := nfsmountConfLine(in); got != want {
			t.Errorf("nfsmountConfLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// options -o json|yaml writes the resolved profile; a backend named by an alias resolves
// to its canonical name, as the fstab comment says it.
func TestOptionsStructured(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "yaml"} {
		stdout, stderr, code := runVerb(t, "options", "--backend", "amazon-efs", "--workload", "sequential-read", "-o", format)
		if code != ExitOK {
			t.Fatalf("-o %s: exit %d: %s", format, code, stderr)
		}
		b := []byte(stdout)
		if format == "yaml" {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		var got struct {
			Backend  string   `json:"backend"`
			Workload string   `json:"workload"`
			Options  []string `json:"options"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, stdout)
		}
		if got.Backend != "aws-efs" || got.Workload != "sequential-read" || !slices.Contains(got.Options, "vers=4.1") {
			t.Errorf("-o %s: %+v, want aws-efs/sequential-read with vers=4.1", format, got)
		}
	}
	fstab, _, _ := runVerb(t, "options", "--backend", "efs", "-o", "fstab")
	if !strings.HasPrefix(fstab, "# nfstune aws-efs/general (built-in)\n") {
		t.Errorf("options --backend efs -o fstab:\n%s", fstab)
	}
}
