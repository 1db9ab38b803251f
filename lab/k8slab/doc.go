// Package k8slab runs nfstune on a real single-node Kubernetes cluster inside the lab
// guest: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet built
// from the pinned k8s.io/kubernetes module, containerd and runc from Debian with AppArmor
// on, and pods whose NFS volumes kubelet mounts from the lab's nfsd. The cluster starts
// once for every case; the tests install the chart with helm and measure what the agent
// does to the volumes. Every file but this one carries the build tag "lab": run them with
// `make k8s-e2e` (lab/k8s-e2e.sh), never on the host.
package k8slab
