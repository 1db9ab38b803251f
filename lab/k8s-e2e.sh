#!/usr/bin/env bash
# Run nfstune on a real one-node Kubernetes cluster in one boot of the lab guest
# (lab/k8slab): the k8s guest root (NFSTUNE_LAB_GUEST=k8s: containerd, runc, CNI plugins,
# AppArmor), booted with AppArmor on, the Kubernetes binaries and a registry built from their
# pinned modules, the agent's image index and packaged chart from `make release`'s
# image-index and chart targets (pushed to the registry in the guest), and the pause and test
# images from lab/k8slab/mkimages.
# `make k8s-e2e` builds what this needs and runs it; the figures go to
# bin/k8s-e2e/summary.json.
#   lab/k8s-e2e.sh [-run REGEXP] [-skip REGEXP]
# Env: K8S_BINARIES (the kubelet, kube-apiserver, kube-controller-manager, kube-scheduler,
# etcd, helm and registry binaries, NAME=PATH separated by blanks), K8S_RELEASE (the
# directory with the image index's OCI layout, oci/, and the packaged chart), K8S_VERSION
# (their version) and K8S_PODS (how many pods TestSequentialPods starts one after another;
# empty for its default, 5).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
export NFSTUNE_LAB_GUEST=k8s
. "$here/lib.sh"
GO=${GO:-go}
start=$(date +%s)

[[ -n ${K8S_BINARIES:-} && -n ${K8S_VERSION:-} && -f ${K8S_RELEASE:-}/oci/index.json ]] ||
	lab_die "K8S_BINARIES, K8S_RELEASE and K8S_VERSION must be set: run make k8s-e2e"
chart=$K8S_RELEASE/nfstune-${K8S_VERSION#v}.tgz
[[ -f $chart ]] || lab_die "no packaged chart $chart: run make k8s-e2e"

# The guest's files go to a directory of their own: others may rebuild bin/ meanwhile.
mkdir -p "$repo/lab/.cache"
bin=$(mktemp -d "$repo/lab/.cache/k8s.XXXXXX")
trap 'rm -rf "$bin"' EXIT
lab_log "building nfstune, the pause and test images and the Kubernetes lab tests"
(
	cd "$repo"
	CGO_ENABLED=0 "$GO" build -trimpath -o "$bin/nfstune" ./cmd/nfstune
	CGO_ENABLED=0 "$GO" build -trimpath -o "$bin/kubectl-nfstune" ./cmd/kubectl-nfstune
	"$GO" run ./lab/k8slab/mkimages -busybox /bin/busybox -out "$bin/lab-images.tar"
	CGO_ENABLED=0 "$GO" test -c -tags lab -o "$bin/k8slab.test" ./lab/k8slab
)
# The agent's AppArmor profile, which TestAgentAppArmorProfile loads on the node.
cp "$repo/deploy/apparmor/nfstune-agent" "$bin/nfstune-agent.apparmor"
mkdir "$bin/release"
cp -r "$K8S_RELEASE/oci" "$chart" "$bin/release/"
for pair in $K8S_BINARIES; do
	cp "$repo/${pair#*=}" "$bin/${pair%%=*}"
done
gbin=/lab/${bin#"$repo"/}

# 40 minutes ran out in the next to last case on a 2-core machine without KVM
# (docs/kubernetes.md).
args=(-test.v -test.timeout=55m)
while (($#)); do
	case $1 in
	-run) args+=("-test.run=$2"); shift 2 ;;
	-skip) args+=("-test.skip=$2"); shift 2 ;;
	*) lab_die "unknown argument $1" ;;
	esac
done

mkdir -p "$repo/bin/k8s-e2e"
summary=$repo/bin/k8s-e2e/summary.json
rm -f "$summary"
# A node's worth of memory: the control plane, containerd and 25 pods, with the images and
# kubelet's and containerd's state on tmpfs. Under TCG the cluster takes minutes to start.
export NFSTUNE_LAB_MEMORY=${NFSTUNE_LAB_MEMORY:-6G}
export NFSTUNE_LAB_TIMEOUT=${NFSTUNE_LAB_TIMEOUT:-4200}
export NFSTUNE_LAB_APPEND="apparmor=1 security=apparmor"
rc=0
"$here/vm.sh" -- env NFSTUNE_K8S_BIN="$gbin" NFSTUNE_K8S_RELEASE="$gbin/release" \
	NFSTUNE_K8S_VERSION="$K8S_VERSION" NFSTUNE_K8S_SUMMARY=/lab/bin/k8s-e2e/summary.json \
	NFSTUNE_K8S_PODS="${K8S_PODS:-}" \
	"$gbin/k8slab.test" "${args[@]}" || rc=$?

elapsed=$(($(date +%s) - start))
if [[ -f $summary ]]; then
	# The whole run, boot and builds included, next to the guest's own figures.
	python3 - "$summary" "$elapsed" <<-'PY'
	import json, sys
	path, elapsed = sys.argv[1], int(sys.argv[2])
	s = json.load(open(path))
	s["elapsed_s"] = elapsed
	json.dump(s, open(path, "w"), indent=2)
	open(path, "a").write("\n")
	PY
	cat "$summary"
else
	lab_log "the guest wrote no summary"
fi
lab_log "k8s-e2e: exit $rc after ${elapsed}s; summary: ${summary#"$repo"/}"
exit "$rc"
