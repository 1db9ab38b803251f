{{/* Labels of a component's objects and its pod selector. */}}
{{- define "nfstune.labels" -}}
app.kubernetes.io/component: {{ . }}
app.kubernetes.io/name: nfstune
{{- end }}

{{/* The image reference: repository@digest when pinned, else repository:tag. */}}
{{- define "nfstune.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* Security context of every container: uid 0 without capabilities, nothing else. The
     agent's may add .capAdd (agent.blockedProcesses) and .appArmorProfile. */}}
{{- define "nfstune.securityContext" -}}
allowPrivilegeEscalation: false
{{- with .appArmorProfile }}
appArmorProfile:
  {{- toYaml . | nindent 2 }}
{{- end }}
capabilities:
  {{- with .capAdd }}
  add:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  drop:
    - ALL
privileged: false
readOnlyRootFilesystem: true
runAsGroup: 0
runAsNonRoot: false
runAsUser: 0
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* NODE_NAME from the downward API. */}}
{{- define "nfstune.env" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      apiVersion: v1
      fieldPath: spec.nodeName
{{- end }}

{{/* Scheduling and pod security shared by the DaemonSets: .root is the chart's context,
     .nodeSelector and .affinity the pod's (the agent's node groups add to the chart's). */}}
{{- define "nfstune.podFrame" -}}
serviceAccountName: nfstune
automountServiceAccountToken: false
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  seccompProfile:
    type: RuntimeDefault
terminationGracePeriodSeconds: 10
{{- end }}

{{/* .affinity with .exclude (node selector requirements) added to every required node
     selector term, or to one term of its own when it has none: the terms are ORed, so
     each must keep off the nodes of the groups before. */}}
{{- define "nfstune.excludeNodes" -}}
{{- $affinity := deepCopy (default dict .affinity) }}
{{- if .exclude }}
{{- $na := default dict $affinity.nodeAffinity }}
{{- $req := default dict (get $na "requiredDuringSchedulingIgnoredDuringExecution") }}
{{- $terms := list }}
{{- range (default (list dict) $req.nodeSelectorTerms) }}
{{- $t := deepCopy . }}
{{- $_ := set $t "matchExpressions" (concat (default list $t.matchExpressions) $.exclude) }}
{{- $terms = append $terms $t }}
{{- end }}
{{- $_ := set $req "nodeSelectorTerms" $terms }}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req }}
{{- $_ := set $affinity "nodeAffinity" $na }}
{{- end }}
{{- toYaml $affinity }}
{{- end }}

{{/* The DaemonSet frame: selector and rolling update. */}}
{{- define "nfstune.updateStrategy" -}}
updateStrategy:
  type: RollingUpdate
  rollingUpdate:
    maxUnavailable: {{ .Values.maxUnavailable }}
{{- end }}

{{/* The read-only host mounts: /proc, with .hostSys the host's /sys/kernel/sunrpc (no
     submount inside, unlike the whole /sys), and the bdi directory at the place its
     /sys/class/bdi symlinks point to. */}}
{{- define "nfstune.readMounts" -}}
- name: host-proc
  mountPath: /host/proc
  readOnly: true
{{- if .hostSys }}
- name: host-sunrpc
  mountPath: /host/sys/kernel/sunrpc
  readOnly: true
{{- end }}
- name: host-bdi
  mountPath: /host/sys/class/bdi
  readOnly: {{ .readOnly }}
{{- end }}

{{- define "nfstune.readVolumes" -}}
- name: host-proc
  hostPath:
    path: /proc
    type: Directory
{{- if .hostSys }}
- name: host-sunrpc
  hostPath:
    path: /sys/kernel/sunrpc
    type: Directory
{{- end }}
- name: host-bdi
  hostPath:
    path: /sys/devices/virtual/bdi
    type: Directory
{{- end }}

{{/* The NFS proxy helpers' state, read-only at its own path below /host. No hostPath
     type: a node without the helper still runs the agent. */}}
{{- define "nfstune.proxyHelperMounts" -}}
{{- range $i, $d := .Values.agent.proxyHelpers.directories }}
- name: proxy-state-{{ $i }}
  mountPath: /host{{ $d }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "nfstune.proxyHelperVolumes" -}}
{{- range $i, $d := .Values.agent.proxyHelpers.directories }}
- name: proxy-state-{{ $i }}
  hostPath:
    path: {{ $d }}
    type: ""
{{- end }}
{{- end }}

{{/* Keeps the pod alive after its init containers; it touches no file, so runs as nobody. */}}
{{- define "nfstune.pause" -}}
- name: pause
  image: {{ include "nfstune.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: [k8s, pause]
  resources:
    requests:
      cpu: 1m
      memory: 8Mi
      ephemeral-storage: 1Mi
    limits:
      cpu: 10m
      memory: 16Mi
      ephemeral-storage: 16Mi
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop:
        - ALL
    privileged: false
    readOnlyRootFilesystem: true
    runAsGroup: 65534
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile:
      type: RuntimeDefault
{{- end }}

{{/* "true" when a policy's recovery shuts superblocks down: recovery on, in enforce mode,
     with the shutdown action, and agent.policyMode enforce; empty otherwise. The pod then
     mounts /sys/fs/nfs and /var/lib/nfstune writable (render.Values.RecoveryShutdown).
     Takes (dict "policy" <the policy text> "policyMode" .Values.agent.policyMode). */}}
{{- define "nfstune.recoveryShutdown" -}}
{{- $r := (fromYaml .policy).recovery | default dict -}}
{{- if and (eq .policyMode "enforce") $r.enabled (eq ($r.mode | default "observe") "enforce") (eq ($r.action | default "shutdown") "shutdown") -}}
true
{{- end -}}
{{- end }}

{{/* "true" when a policy's recovery is on, in any mode: the pod mounts /sys/fs/nfs, read-only
     unless recoveryShutdown, so that the agent in observe mode tells whether it would shut a
     superblock down or only report it (render.Values.hostWrites). */}}
{{- define "nfstune.recoveryEnabled" -}}
{{- if ((fromYaml .policy).recovery | default dict).enabled -}}
true
{{- end -}}
{{- end }}

{{/* Not empty when the agent journals what it writes beyond the profile's read-ahead, and so
     mounts /var/lib/nfstune writable: recovery's shutdown, or an adaptive read-ahead that may
     write under agent.policyMode enforce (render.Values.hostWrites, policy.AdaptiveWrites): a
     rule's readAheadAdaptive not observe in itself, nor by its rule's or the policy's mode;
     or the default one (defaults.readAheadAdaptive not false, nor observe in itself) under
     the policy's mode, or a rule's that pins no read-ahead of its own. Takes what
     recoveryShutdown takes. */}}
{{- define "nfstune.journals" -}}
{{- include "nfstune.recoveryShutdown" . -}}
{{- if eq .policyMode "enforce" -}}
{{- $p := fromYaml .policy -}}
{{- $defaults := $p.defaults | default dict -}}
{{- $mode := $defaults.mode | default "enforce" -}}
{{- $default := true -}}
{{- if hasKey $defaults "readAheadAdaptive" -}}
{{- $d := $defaults.readAheadAdaptive -}}
{{- if kindIs "bool" $d -}}
{{- $default = $d -}}
{{- else if kindIs "map" $d -}}
{{- $default = not $d.observe -}}
{{- end -}}
{{- end -}}
{{- if and $default (ne $mode "observe") -}}
true
{{- end -}}
{{- range ($p.rules | default list) -}}
{{- if and (hasKey . "readAheadAdaptive") (not (.readAheadAdaptive | default dict).observe) (ne (.mode | default $mode) "observe") -}}
true
{{- end -}}
{{- $pins := or (hasKey . "readAheadAdaptive") (hasKey . "readAheadKB") (hasKey . "readAheadRSizes") (hasKey . "readAheadExact") -}}
{{- if and $default (not $pins) (ne (.mode | default $mode) "observe") -}}
true
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Checks the values the templates cannot render around. */}}
{{- define "nfstune.validate" -}}
{{- if and .Values.createNamespace (or (eq .Values.namespace "default") (hasPrefix "kube-" .Values.namespace)) }}
{{- fail (printf "namespace %q: created by Kubernetes, and createNamespace would relabel it Pod Security privileged; choose another namespace, or set createNamespace to false and label it yourself" .Values.namespace) }}
{{- end }}
{{- if not (has .Values.mode (list "agent" "installer" "revert")) }}
{{- fail (printf "mode %q: want \"agent\", \"installer\" or \"revert\"" .Values.mode) }}
{{- end }}
{{- if not (has .Values.agent.policyMode (list "observe" "enforce")) }}
{{- fail (printf "agent.policyMode %q: want \"observe\" or \"enforce\"" .Values.agent.policyMode) }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled .Values.metrics.serviceMonitor.enabled }}
{{- fail "metrics.podMonitor and metrics.serviceMonitor: enable one, or Prometheus scrapes every agent twice" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service) }}
{{- fail "metrics.serviceMonitor: needs metrics.service, the Service it scrapes through" }}
{{- end }}
{{- if and .Values.image.digest (not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest)) }}
{{- fail (printf "image.digest %q: want sha256:<64 hex digits>" .Values.image.digest) }}
{{- end }}
{{- $shutdown := include "nfstune.recoveryShutdown" (dict "policy" .Values.policy "policyMode" .Values.agent.policyMode) }}
{{- range .Values.nodeGroups }}
{{- $shutdown = print $shutdown (include "nfstune.recoveryShutdown" (dict "policy" .policy "policyMode" $.Values.agent.policyMode)) }}
{{- end }}
{{- if and $shutdown (not .Values.agent.hostSys) }}
{{- fail "policy recovery: needs agent.hostSys, the transports that show which servers stalled" }}
{{- end }}
{{- if and $shutdown (not .Values.agent.blockedProcesses.enabled) }}
{{- fail "policy recovery: needs agent.blockedProcesses: without it the agent cannot see every process that holds a superblock, and never shuts one down" }}
{{- end }}
{{- if and .Values.agent.podIO.enabled (not .Values.agent.podCgroups) }}
{{- fail "agent.podIO: needs agent.podCgroups, where the agent finds which pod a cgroup belongs to" }}
{{- end }}
{{- if and .Values.agent.blockedProcesses.enabled (not .Values.agent.hostSys) }}
{{- fail "agent.blockedProcesses: needs agent.hostSys, the transports that show which servers stalled" }}
{{- end }}
{{- with .Values.agent.appArmorProfile }}
{{- if and (eq .type "Localhost") (not .localhostProfile) }}
{{- fail "agent.appArmorProfile: type Localhost needs localhostProfile, the name of a profile loaded on every node" }}
{{- end }}
{{- if and (ne .type "Localhost") .localhostProfile }}
{{- fail "agent.appArmorProfile.localhostProfile: only with type Localhost" }}
{{- end }}
{{- end }}
{{- if and .Values.nodeGroups (ne .Values.mode "agent") }}
{{- fail "nodeGroups: only in agent mode" }}
{{- end }}
{{- $names := list }}
{{- $selectors := dict }}
{{- range $i, $g := .Values.nodeGroups }}
{{- if eq $g.name "default" }}
{{- fail (printf "nodeGroups[%d].name %q: the nodes of no group are the default group" $i $g.name) }}
{{- end }}
{{- if has $g.name $names }}
{{- fail (printf "nodeGroups[%d].name %q: listed twice" $i $g.name) }}
{{- end }}
{{- $names = append $names $g.name }}
{{- range $k, $v := $g.nodeSelector }}
{{- $sel := printf "%s=%s" $k $v }}
{{- if hasKey $selectors $sel }}
{{- fail (printf "nodeGroups[%d].nodeSelector %s=%q: the same as group %q's, which takes those nodes first" $i $k $v (get $selectors $sel)) }}
{{- end }}
{{- $_ := set $selectors $sel $g.name }}
{{- end }}
{{- end }}
{{- if and .Values.grafanaDashboard.enabled (not .Values.grafanaDashboard.labels) }}
{{- fail "grafanaDashboard.labels: empty, so no dashboard sidecar would load the ConfigMap" }}
{{- end }}
{{- end }}

{{/* The PodMonitor's and ServiceMonitor's endpoint: a node label on every series, then
     the user's relabelings. */}}
{{- define "nfstune.scrapeEndpoint" -}}
- port: metrics
  path: /metrics
  interval: {{ .Values.metrics.interval }}
  scrapeTimeout: {{ .Values.metrics.scrapeTimeout }}
  relabelings:
    - action: replace
      sourceLabels:
        - __meta_kubernetes_pod_node_name
      targetLabel: node
    {{- with .Values.metrics.relabelings }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.metrics.metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
