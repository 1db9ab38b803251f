# nfstune build, test and lab targets. `make verify` is the fast gate (format, vet, lint);
# `make check` runs it and then every test; `make demo` runs the lab demo.
GO       ?= go
# Every go command builds with the toolchain go.mod names (its `toolchain` line), fetched once
# from the Go module proxy when the installed go differs, so the binaries carry the standard
# library's fixes whatever Go the machine has.
export GOTOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)
BIN      := bin/nfstune
# VERSION is the release in internal/version/VERSION on its tag, else a pre-release of it,
# v0.1.0-dev.g<commit>[.dirty] (hack/version.sh); the binaries, image tags and chart carry it.
ifeq ($(origin VERSION),undefined)
VERSION  := $(shell bash hack/version.sh)
endif
LDFLAGS  := -s -w -X github.com/nfstune/nfstune/internal/version.Version=$(VERSION)
# helm is built once from the Go module proxy (a few minutes) for helm-lint and helm-test.
HELM_VERSION ?= v3.22.0
HELM     := bin/tools/helm-$(HELM_VERSION)/helm
# cyclonedx-gomod writes the release's SBOMs (CycloneDX, from each binary's build info).
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
CYCLONEDX_GOMOD := bin/tools/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)/cyclonedx-gomod
# golangci-lint is built the same way for verify (12 minutes the first time on a busy 2-core
# machine); shellcheck comes from Debian (.ci/run installs it).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := bin/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
# govulncheck reads the Go vulnerability database of a pinned golang.org/x/vulndb module (its
# OSV files, indexed by the module's own indexdb), so vulncheck's verdict changes with the tree,
# not with the day. Raise VULNDB_VERSION to learn of newer advisories.
GOVULNCHECK_VERSION ?= v1.9.0
GOVULNCHECK := bin/tools/govulncheck-$(GOVULNCHECK_VERSION)/govulncheck
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULNDB   := bin/tools/vulndb-$(VULNDB_VERSION)
# The Python of hack/ (the dashboard drawer, the nfsiostat comparison): pyflakes, from Debian.
PYTHON_SCRIPTS := $(wildcard hack/*.py hack/*/*.py)
SHELL_SCRIPTS := $(wildcard lab/*.sh lab/guest/*.sh perf/*/*.sh hack/*.sh hack/*/*.sh) lab/guest/labctl .ci/run
# The tagged tests (lab, helm, apiserver, release) are vetted and linted with the rest.
TAGS     := lab,helm,apiserver,release

PROMTOOL ?= promtool

.PHONY: all host-packages build plugin verify test bench-smoke bpf vulncheck vet scrape-test rules-test compare-nfsiostat check lab-setup lab-test lab-matrix lab-record lab-shell demo minimal-root-check clean helm-lint helm-test image apiserver-test dashboard-png k8s-tools k8s-e2e readahead-table readahead-table-base k8s-e2e-long lab-matrix-long lab-test-long check-long release release-binaries image-index chart release-test lab-arm64 lab-tls chart-readme lab-sidebyside podio-overhead lab-curves

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nfstune

# kubectl-nfstune, the kubectl plugin (docs/kubernetes.md): put it on the PATH.
plugin:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/kubectl-nfstune ./cmd/kubectl-nfstune

vet:
	$(GO) vet -tags $(TAGS) ./...

# verify is the fast gate, run before any test: gofmt, go vet, golangci-lint (.golangci.yml:
# staticcheck, revive's exported rule, depguard, forbidigo, gochecknoinits, errcheck,
# ineffassign, unused), shellcheck, and pyflakes on the Python of hack/. go vet also runs in
# perf/scrape, a module of its own that builds this one (replace ../..), so that a
# dependency added here without its go.sum there fails now rather than in bench-smoke.
verify: host-packages $(GOLANGCI_LINT)
	bash hack/bpf-gen.sh --check
	@unformatted=$$(gofmt -l cmd internal lab perf hack deploy); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: run gofmt -w on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...
	cd perf/scrape && $(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	shellcheck -x $(SHELL_SCRIPTS)
	pyflakes3 $(PYTHON_SCRIPTS)

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

test:
	$(GO) test -count=1 ./...

# bench-smoke runs once each benchmark of a host with many mounts (docs/benchmarks.md):
# the audit of 1,000 and 10,000 mounts (the library's and the command's), the agent's
# reaction to a new superblock and its heap beside 10,000, and nfstune's default-tier
# scrape of 10,000 (node_exporter's takes minutes there: the comparison is run by hand).
# It asserts no time, which the machine's load moves; it keeps the benchmarks building and
# running, with their own checks of what each read, and their figures in the log.
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkAudit(1000|10000)$$' -benchtime 1x -benchmem ./internal/audit
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(AuditCommand(1000|10000)|NewRoot)$$' -benchtime 1x -benchmem ./internal/cli
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(ReactionWork10000|ReactionWorkAdaptive10000|AgentHeap|AdaptStep)$$' -benchtime 1x -benchmem ./internal/agent
	cd perf/scrape && $(GO) test -count=1 -run '^$$' -bench '^BenchmarkScrape10000$$/^nfstune' -benchtime 1x -benchmem .

# bpf regenerates the per-pod NFS I/O collector's eBPF objects (committed; make verify checks
# them against their sources).
bpf:
	GO=$(GO) bash hack/bpf-gen.sh

# vulncheck fails when code of this module (every build tag) reaches a known vulnerability in
# the standard library or a dependency.
vulncheck: $(GOVULNCHECK) $(VULNDB)/index/db.json
	$(GOVULNCHECK) -db file://$(CURDIR)/$(VULNDB) -tags $(TAGS) ./...

$(GOVULNCHECK):
	GOBIN=$(CURDIR)/$(dir $(GOVULNCHECK)) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

$(VULNDB)/index/db.json:
	GOBIN=$(CURDIR)/bin/tools/indexdb-$(VULNDB_VERSION) $(GO) install golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION)
	rm -rf $(VULNDB)
	bin/tools/indexdb-$(VULNDB_VERSION)/indexdb -out $(VULNDB) \
		-vulns "$$($(GO) env GOMODCACHE)/golang.org/x/vulndb@$(VULNDB_VERSION)/data/osv"

# scrape-test checks the scrape comparison's fixture in its own module (it builds against
# node_exporter); the comparison itself is a benchmark, run by hand (docs/benchmarks.md, The agent's cost).
scrape-test:
	cd perf/scrape && $(GO) vet ./... && $(GO) test -count=1 ./...

# rules-test checks the Prometheus rules the chart installs and runs their unit tests
# (deploy/prometheus/tests) with promtool, from Debian's prometheus package (.ci/run
# installs it). deploy's Go test checks the metric names they and the Grafana dashboard use
# against the agent's output.
rules-test: host-packages
	$(PROMTOOL) check rules deploy/helm/nfstune/files/nfstune-rules.yaml
	$(PROMTOOL) test rules deploy/prometheus/tests/*.test.yaml

# host-packages installs, as root from Debian, the host commands the checks need besides Go
# when they are missing (hack/deps.sh: shellcheck for verify, promtool from the prometheus
# package for rules-test and the Go tests that run it), and names any it could not install.
# The lab's commands come with lab-setup (hack/deps.sh ensure lab).
host-packages:
	bash hack/deps.sh ensure ci verify

# check runs verify first, then every test: unit tests, the large-host benchmarks once
# (bench-smoke), the scrape comparison's module, the Prometheus rules, the chart against
# nfstune k8s render, then the real-kernel lab tests: all of them on 6.1, a smoke suite on
# the other kernel lines. The tests start only once verify
# has passed, with make -j too.
check: verify
	$(MAKE) vulncheck test bench-smoke scrape-test rules-test release helm-lint helm-test apiserver-test lab-test lab-matrix k8s-e2e minimal-root-check

# check-long runs what check leaves out to fit CI's budget (about an hour and a half on 2
# cores): the stuck server's and the recovery cases on every kernel line, the recovery,
# AppArmor, kubectl nfstune, node groups and nfsmount.conf drop-in cases on a real kubelet
# (Linux 6.12), the reaction to 50 mounts and the collector's mapped over-read on 6.1, the
# read-ahead table, the agent's reaction beside an older tree, NFS over TLS, and the load
# curves three times each. Run it before a release.
check-long:
	$(MAKE) lab-test-long lab-matrix-long k8s-e2e-long readahead-table lab-sidebyside lab-tls lab-curves

# lab-sidebyside compares this tree with REACTION_BASE in one boot of the lab guest
# (lab/sidebyside.sh, docs/benchmarks.md): the agent's reaction to 20 new NFSv3 mounts and the
# audit with the server gone, each binary run three times, alternately. It fails only when
# this tree's slowest figure is more than twice the base's; it reports p50, max and their
# ratios. REACTION_BASE is the merge of 2026-11-26 (adaptive read-ahead, recovery, fleet),
# the last tree before the commits that changed the reconcile's path (the 20 s settle
# re-check, a write overwritten before its read-back, the nfsfs volumes listing read again):
# a fixed reference, so that a slow drift over many commits shows as well as a sudden one.
# It needs that commit in the clone's history.
REACTION_BASE ?= 954675d
lab-sidebyside: lab-setup
	GO=$(GO) bash lab/sidebyside.sh $(REACTION_BASE) -run '^(TestReactionSideBySide|TestAuditServerGoneSideBySide)$$'

# compare-nfsiostat compares nfstune stats --view attr,dir,page with nfs-utils' nfsiostat -a,
# -d and -p on saved mountstats samples read in place (REAL_MOUNTSTATS, never copied here). It
# needs root (nfsiostat runs in a private mount namespace) and nfs-common, and the samples,
# which are not in the repository, so make check does not run it (docs/agent.md, Evidence views).
REAL_MOUNTSTATS ?= ../shared/real-mountstats
compare-nfsiostat:
	bash hack/compare-nfsiostat-views.sh $(REAL_MOUNTSTATS)

# minimal-root-check proves that a bare Debian 12 machine gets through the set-up: in a Debian
# minbase root with only Go, make, git, python3 and ca-certificates, hack/deps.sh names what is
# missing, lab-setup installs it, make demo's first boot passes, a removed package is installed
# again, and with installing off one line names the missing command and its package
# (hack/minimal-root.sh; --full runs .ci/run there from empty caches).
minimal-root-check: lab-setup
	bash hack/minimal-root.sh

# image builds the agent's OCI image from the static binary without a container daemon:
# bin/image/oci (OCI layout), bin/image/nfstune-$(VERSION).tar and bin/image/digest.
image: build
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
		$(GO) run ./internal/image/mkimage -binary $(BIN) -version $(VERSION) -out bin/image

# release writes, from a clean clone, what a release publishes to bin/release: every
# cmd/* program for linux/amd64 and linux/arm64 (<cmd>-linux-<arch>, static), the agent's
# OCI image index of both architectures (oci/, the layout, and nfstune-$(VERSION).oci.tar,
# the same as one archive; digest), the Helm chart packaged with version and appVersion set
# from VERSION (nfstune-<version without v>.tgz), a CycloneDX SBOM per binary listing the Go
# modules in it (<binary>.cdx.json), and SHA256SUMS over them all (sha256sum -c SHA256SUMS).
# It ends with release-test; make check runs it.
RELEASE_DIR    := bin/release
RELEASE_ARCHES := amd64 arm64
RELEASE_CMDS    = $(notdir $(wildcard cmd/*))
# RELEASE_URL is where a release's files are downloaded from, below a directory per version:
# the krew manifest (nfstune.yaml) points there.
RELEASE_URL    ?= https://github.com/nfstune/nfstune/releases/download
CHART_VERSION   = $(patsubst v%,%,$(VERSION))
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
release: image-index chart $(CYCLONEDX_GOMOD)
	set -e; for cmd in $(RELEASE_CMDS); do for arch in $(RELEASE_ARCHES); do \
		$(CYCLONEDX_GOMOD) bin -json -version $(VERSION) -output $(RELEASE_DIR)/$$cmd-linux-$$arch.cdx.json $(RELEASE_DIR)/$$cmd-linux-$$arch; \
	done; done
	bash hack/release-extras.sh $(RELEASE_DIR) $(VERSION) $(RELEASE_URL)/$(VERSION)
	cd $(RELEASE_DIR) && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name digest -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
	$(MAKE) release-test

# release-binaries starts bin/release afresh with the static binaries of every cmd/*.
release-binaries:
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	set -e; for cmd in $(RELEASE_CMDS); do for arch in $(RELEASE_ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(RELEASE_DIR)/$$cmd-linux-$$arch ./cmd/$$cmd; \
	done; done

# image-index builds the agent's image for each architecture and the OCI image index of
# them, without a container daemon (internal/image).
image-index: release-binaries
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/image/mkimage \
		$(foreach a,$(RELEASE_ARCHES),-index $(a)=$(RELEASE_DIR)/nfstune-linux-$(a)) -version $(VERSION) -out $(RELEASE_DIR)

# chart-readme writes the chart's README (deploy/helm/nfstune/README.md, packaged with the
# chart) from values.yaml's comments and values.schema.json; deploy's TestChartReadme fails
# when the committed file differs.
chart-readme:
	UPDATE_GOLDEN=1 $(GO) test -count=1 -run '^TestChartReadme$$' ./deploy/

# chart packages the Helm chart into bin/release with version and appVersion from VERSION.
chart: release-binaries $(HELM)
	$(HELM) package deploy/helm/nfstune --version $(CHART_VERSION) --app-version $(VERSION) -d $(RELEASE_DIR)

# release-test checks bin/release as make release left it (internal/release, build tag
# release): the checksums verify with sha256sum -c, each SBOM lists the modules of its
# binary's build info (go version -m), the image index holds both platforms with the very
# binaries, and the chart, the binaries and the index carry VERSION.
release-test:
	NFSTUNE_RELEASE_DIR=$(CURDIR)/$(RELEASE_DIR) NFSTUNE_RELEASE_VERSION=$(VERSION) \
		$(GO) test -count=1 -tags release ./internal/release/

$(CYCLONEDX_GOMOD):
	GOBIN=$(CURDIR)/$(dir $(CYCLONEDX_GOMOD)) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)

$(HELM):
	GOBIN=$(CURDIR)/$(dir $(HELM)) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

helm-lint: $(HELM)
	$(HELM) lint --strict deploy/helm/nfstune
	$(HELM) lint --strict deploy/helm/nfstune --set mode=installer
	$(HELM) lint --strict deploy/helm/nfstune --set mode=revert,installer.nfsmountConf=true
	$(HELM) lint --strict deploy/helm/nfstune --set prometheusRule.enabled=true,metrics.podMonitor.enabled=true,grafanaDashboard.enabled=true
	$(HELM) lint --strict deploy/helm/nfstune -f internal/render/testdata/agent-node-groups.values.yaml
	$(HELM) template nfstune deploy/helm/nfstune >/dev/null

# helm-test renders the chart with helm template and compares it, object by object, with
# nfstune k8s render for the same values (internal/render/helm_test.go).
helm-test: $(HELM)
	NFSTUNE_HELM=$(CURDIR)/$(HELM) $(GO) test -count=1 -tags helm -run Helm ./internal/render/

# The real-kernel lab (lab/README.md): a Debian kernel with nfsd and the NFS client under
# qemu. lab-setup installs what the host lacks and caches the guest root in
# $(NFSTUNE_LAB_CACHE) (default /var/cache/nfstune-lab); the other targets boot it.
lab-setup:
	bash lab/setup.sh

# lab-test runs lab/labtest and lab/agentlab inside one boot of the guest with the binary
# built from this tree. LAB_TEST_SKIP are the lab tests lab-test leaves to others: the
# read-ahead waste case to make readahead-table, which boots the guest with the memory it
# needs (a 1 MiB rsize), and the read traffic classes of pods' cgroups (their thresholds are
# not yet measured against field workloads, so a busy guest must not gate a change on them);
# the recovery case to lab-matrix, on 7.2 (the shutdown path), and lab-matrix-long, on 5.10
# too (the report path of 6.1); both load curves to lab-curves (make check keeps the bench
# runs of one workload and of a remount sweep); and LAB_TEST_LONG to lab-test-long.
LAB_TEST_SKIP ?= ^(TestReadAheadWaste|TestPodTrafficClass|TestRecovery|TestBenchCurveNConnect|TestBenchCurveToolsNocto|$(LAB_TEST_LONG))$$
lab-test: lab-setup
	GO=$(GO) bash lab/test.sh -test.skip='$(LAB_TEST_SKIP)'

# LAB_TEST_LONG are the lab tests that make check leaves to check-long, each with a shorter
# case of its capability in lab-test: the reaction to 50 mounts at once (TestAgentNoConfigTunes20
# and TestNewMountsTuned stay, and k8s-e2e's pods on a kubelet), and the per-pod collector's
# over-read of mapped readers at two windows (TestAgentPodIO, TestPodIO and
# TestAgentMappedLearnedSecondMount stay; the figure's thresholds have their unit tests).
LAB_TEST_LONG := TestReaction50|TestPodIOMappedOverRead
lab-test-long: lab-setup
	GO=$(GO) bash lab/test.sh -test.run='^($(LAB_TEST_LONG))$$'

# lab-curves draws the load curves of docs/benchmarks.md three times each in one boot:
# nconnect 1 against 4 on the EDA mix, and the default against nocto,actimeo=600 on a
# read-only tree over a 5 ms round trip (about 25 minutes). The results are saved in
# lab/.cache/curves (the guest's /lab/lab/.cache/curves), for nfstune bench report.
lab-curves: lab-setup
	rm -rf lab/.cache/curves
	NFSTUNE_LAB_CURVE_OUT=/lab/lab/.cache/curves GO=$(GO) LAB_PACKAGES=./lab/labtest bash lab/test.sh \
		-run '^(TestBenchCurveNConnect|TestBenchCurveToolsNocto)$$' -test.count=3

# lab-matrix runs the lab's smoke suite, what depends on the kernel, on the 5.10, 6.12 and
# 7.2 kernels, one boot each (LAB_KERNELS="5.10" to pick), the recovery case on 7.2 only;
# lab-setup fetches and caches each kernel on first use. lab-matrix-long adds the stuck
# server's cases and the recovery case on each line (LAB_SMOKE=long).
LAB_KERNELS ?=
lab-matrix: lab-setup
	GO=$(GO) bash lab/matrix.sh $(LAB_KERNELS)

lab-matrix-long: lab-setup
	LAB_SMOKE=long GO=$(GO) bash lab/matrix.sh $(LAB_KERNELS)

# lab-arm64 runs the lab's arm64 suite: Debian's arm64 kernel on an arm64 root under
# qemu-system-aarch64, nfstune and the tests built with GOARCH=arm64 (lab/arm64.sh). The
# first run builds the arm64 root through qemu-user (lab-setup with NFSTUNE_LAB_GUEST=arm64).
lab-arm64:
	GO=$(GO) bash lab/arm64.sh

# lab-tls runs NFS over TLS (lab/tlslab) in a guest of its own: a Debian 13 root with its
# kernel 6.12 and ktls-utils' tlshd (Debian 12 has none), built once (a few minutes), then
# one boot. Not part of check: TLS is covered there by recorded fixtures.
lab-tls:
	NFSTUNE_LAB_GUEST=tls bash lab/setup.sh
	NFSTUNE_LAB_GUEST=tls LAB_PACKAGES=./lab/tlslab GO=$(GO) bash lab/test.sh

# lab-record writes the guest's /proc, /sys and /etc files that nfstune reads into
# internal/inventory/testdata/lab-<kernel>/ (and -server-gone/); NFSTUNE_LAB_KERNEL=5.10 (6.12,
# 7.2) records from that kernel line.
lab-record: lab-setup
	bash lab/record.sh

# lab-shell boots the guest with the scenario mounted and gives an interactive shell.
lab-shell: lab-setup
	bash lab/vm.sh --shell --scenario

# readahead-table measures nfstune with no configuration (the agent without --config, and
# with --pod-io) against fixed read-ahead values in one boot (lab/ratable, docs/benchmarks.md):
# seven workloads, each read with four fixed values and under each arm, about an hour and a
# quarter under emulation, not part of check. The guest gets 5 GiB so that nfsd grants a 1 MiB
# rsize; the table goes to lab/.cache/readahead-table-<kernel>.md. NFSTUNE_LAB_KERNEL picks
# the kernel line, NFSTUNE_LAB_SCENARIOS=f,g a part, NFSTUNE_LAB_ARMS=default an arm.
readahead-table: lab-setup
	NFSTUNE_LAB_MEMORY=$${NFSTUNE_LAB_MEMORY:-5G} NFSTUNE_LAB_TIMEOUT=$${NFSTUNE_LAB_TIMEOUT:-10800} \
		LAB_PACKAGES="./lab/labtest ./lab/ratable" GO=$(GO) bash lab/test.sh -test.timeout=3h \
		-run '^(TestReadAheadTable|TestReadAheadWaste|TestPodTrafficClass)$$'

# readahead-table-base runs the table with the agent built from READAHEAD_BASE (a git ref) as
# an arm beside this tree's (NFSTUNE_LAB_ARMS=base,default, lab/sidebyside.sh) in one boot:
# how a change of the controller reads against the tree before it, on the same fixed values.
# NFSTUNE_LAB_SCENARIOS=b and NFSTUNE_LAB_PAIRS=3 make it one workload, three runs an arm.
READAHEAD_BASE ?= HEAD~1
readahead-table-base: lab-setup
	NFSTUNE_LAB_ARMS=$${NFSTUNE_LAB_ARMS:-base,default} NFSTUNE_LAB_MEMORY=$${NFSTUNE_LAB_MEMORY:-5G} \
		NFSTUNE_LAB_TIMEOUT=$${NFSTUNE_LAB_TIMEOUT:-10800} LAB_PACKAGES=./lab/ratable GO=$(GO) \
		bash lab/sidebyside.sh $(READAHEAD_BASE) -test.timeout=3h -run '^TestReadAheadTable$$'

# podio-overhead measures the per-pod NFS I/O collector's cost in one boot (lab/podiocost,
# docs/benchmarks.md): a sequential reader and 16 KiB random reads without an agent, under
# `nfstune agent --observe` and under `nfstune agent --observe --pod-io`, alternately,
# NFSTUNE_LAB_ROUNDS rounds (4), with the collector's programs' run time per READ (the
# kernel's BPF statistics). About a quarter of an hour under emulation, not part of check;
# the table goes to lab/.cache/podio-overhead-<kernel>.md.
podio-overhead: lab-setup
	LAB_PACKAGES=./lab/podiocost GO=$(GO) bash lab/test.sh -run '^TestPodIOOverhead$$'

# demo shows what read-ahead does on a cloud-like link, with nfstune's audit.
demo: lab-setup
	bash lab/demo.sh

# dashboard-png draws docs/dashboard.png: every panel of the Grafana dashboard, with its own
# queries, run by Prometheus on the agent's /metrics recorded in the lab
# (hack/dashboard/lab-scrape.om.gz); RECORD=1 boots the lab to record it anew (about 10
# minutes). Needs Debian's prometheus and python3-matplotlib; not part of check.
dashboard-png:
	bash hack/dashboard/png.sh $(if $(RECORD),--record)

# apiserver-test creates every rendered object in a real kube-apiserver (v1.36.3, with etcd
# v3.6.7) built from the Go module proxy: strict field validation and the default admission
# plugins, PodSecurity included. The first build takes about 15 minutes on 2 cores; later
# builds reuse Go's build cache (about 35 s).
KUBE_APISERVER := bin/tools/kube-apiserver-v1.36.3
ETCD           := bin/tools/etcd-v3.6.7
# The version is stamped as Kubernetes' own build does: the components report v1.36.3.
KUBE_LDFLAGS   := -X k8s.io/component-base/version.gitVersion=v1.36.3 \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36
$(KUBE_APISERVER):
	cd hack/tools/kubernetes/kube && \
		$(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(CURDIR)/$@ k8s.io/kubernetes/cmd/kube-apiserver
$(ETCD):
	cd hack/tools/kubernetes/etcd && $(GO) build -o $(CURDIR)/$@ go.etcd.io/etcd/server/v3
# The node's binaries come from the same module and the same build cache as kube-apiserver:
# after it, the three take about 3 minutes more on 2 cores.
KUBELET        := bin/tools/kubelet-v1.36.3
KUBE_CM        := bin/tools/kube-controller-manager-v1.36.3
KUBE_SCHEDULER := bin/tools/kube-scheduler-v1.36.3
$(KUBELET) $(KUBE_CM) $(KUBE_SCHEDULER):
	cd hack/tools/kubernetes/kube && \
		$(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(CURDIR)/$@ k8s.io/kubernetes/cmd/$(patsubst %-v1.36.3,%,$(notdir $@))
apiserver-test: $(KUBE_APISERVER) $(ETCD)
	NFSTUNE_KUBE_APISERVER=$(CURDIR)/$(KUBE_APISERVER) NFSTUNE_ETCD=$(CURDIR)/$(ETCD) \
		$(GO) test -count=1 -tags apiserver -run APIServer ./internal/render/ ./internal/plugin/

# k8s-e2e runs nfstune on a real one-node cluster in the lab guest (lab/k8s-e2e.sh,
# docs/kubernetes.md): containerd and runc with AppArmor on, a registry on the node holding
# the release's image index and chart, the agent installed with helm from there, kubelet
# mounting the pods' NFS volumes. It writes bin/k8s-e2e/summary.json.
# The registry is distribution's, built from its Go module like the Kubernetes binaries.
REGISTRY_VERSION ?= v3.0.0
REGISTRY := bin/tools/registry-$(REGISTRY_VERSION)/registry
$(REGISTRY):
	GOBIN=$(CURDIR)/$(dir $(REGISTRY)) $(GO) install github.com/distribution/distribution/v3/cmd/registry@$(REGISTRY_VERSION)
k8s-tools: $(KUBE_APISERVER) $(ETCD) $(KUBELET) $(KUBE_CM) $(KUBE_SCHEDULER) $(HELM) $(REGISTRY)
# K8S_E2E_LONG are the cases k8s-e2e leaves to k8s-e2e-long, which boots the cluster on Linux
# 6.12: the recovery case needs Linux 6.6 to shut a superblock down (lab/k8slab/recovery_test.go,
# docs/agent.md, Recovery); the agent under its AppArmor profile, the kubectl nfstune cases
# (apiserver-test runs the plugin against a real kube-apiserver and agents in make check)
# and the installer's nfsmount.conf drop-in (lab-test runs the drop-in on the kernel) each
# install the chart once more, 2 to 7 minutes each under emulation. TestFleet also selects
# TestFleetBench: kubectl nfstune bench's Indexed Job of four pods on two volumes, one
# curve drawn and one run interrupted (lab/k8slab/bench_test.go), about 10 minutes.
K8S_E2E_LONG := TestRecovery|TestAgentAppArmorProfile|TestFleet|TestInlineVolumeNFSMountConf
K8S_E2E_SKIP ?= ^($(K8S_E2E_LONG))
# K8S_PODS is how many pods the sequential case starts, one after another (5 unless set):
# under emulation each takes 20 to 50 s, more as pods accumulate on the node (K8S_PODS=20
# for the figure in docs/kubernetes.md).
K8S_PODS ?=
k8s-e2e: image-index chart k8s-tools
	NFSTUNE_LAB_GUEST=k8s bash lab/setup.sh
	GO=$(GO) K8S_RELEASE=$(RELEASE_DIR) K8S_VERSION=$(VERSION) K8S_PODS=$(K8S_PODS) \
		K8S_BINARIES="kubelet=$(KUBELET) kube-apiserver=$(KUBE_APISERVER) kube-controller-manager=$(KUBE_CM) kube-scheduler=$(KUBE_SCHEDULER) etcd=$(ETCD) helm=$(HELM) registry=$(REGISTRY)" \
		bash lab/k8s-e2e.sh -skip '$(K8S_E2E_SKIP)'

# k8s-e2e-long runs K8S_E2E_LONG, after the agent's install, on the same cluster booted with
# Linux 6.12: the agent under deploy/apparmor/nfstune-agent tunes a volume while a container
# under the profile cannot reach host files through /proc/1/root; kubectl nfstune reports
# the node compliant, then an untuned mount, then an unreachable agent; each node group's
# agent gets its own policy; an inline volume mounts with the installer's nfsmount.conf
# drop-in; a pod deleted while its NFS server is gone stays Terminating under the
# observe-mode policy and is removed once the policy enforces (bin/k8s-e2e/recovery.json).
k8s-e2e-long: image-index chart k8s-tools
	NFSTUNE_LAB_GUEST=k8s NFSTUNE_LAB_KERNEL=6.12 bash lab/setup.sh
	NFSTUNE_LAB_KERNEL=6.12 GO=$(GO) K8S_RELEASE=$(RELEASE_DIR) K8S_VERSION=$(VERSION) \
		K8S_BINARIES="kubelet=$(KUBELET) kube-apiserver=$(KUBE_APISERVER) kube-controller-manager=$(KUBE_CM) kube-scheduler=$(KUBE_SCHEDULER) etcd=$(ETCD) helm=$(HELM) registry=$(REGISTRY)" \
		bash lab/k8s-e2e.sh -run '^(TestAgentInstalled|$(K8S_E2E_LONG))'

clean:
	rm -rf bin
