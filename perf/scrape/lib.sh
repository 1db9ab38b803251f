# shellcheck shell=bash
# Shared by footprint.sh and slowreaders.sh (sourced, from perf/scrape): a synthetic host
# root and an nfstune agent serving it.

# start_agent N LOG_LEVEL writes a synthetic root with N NFS mounts into $tmp/root (OPS=typical
# keeps only the dozen operations a file-serving mount uses), builds nfstune unless NFSTUNE
# names a binary, starts `nfstune agent` on it (METRICS picks the tier, full by default) and
# waits until it is ready. It sets tmp, pid and port; the EXIT trap stops the agent and
# removes $tmp.
start_agent() {
	local n=$1 level=$2 bin
	tmp=$(mktemp -d)
	pid=
	trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
	go run ./gentree "$tmp/root" "$n"
	if [[ ${OPS:-} == typical ]]; then
		awk 'BEGIN { split("NULL READ WRITE COMMIT OPEN CLOSE SETATTR ACCESS GETATTR LOOKUP READDIR READDIRPLUS SEQUENCE FSINFO", k); for (i in k) keep[k[i] ":"] = 1 }
			/^[ \t]+[A-Z_0-9]+: [0-9]/ && !($1 in keep) { sub(/:.*/, ": 0 0 0 0 0 0 0 0 0") } { print }' \
			"$tmp/root/proc/1/mountstats" >"$tmp/ms" && mv "$tmp/ms" "$tmp/root/proc/1/mountstats"
	fi
	bin=${NFSTUNE:-$tmp/nfstune}
	[[ -n ${NFSTUNE:-} ]] || (cd ../.. && CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/nfstune)
	port=$((20000 + RANDOM % 20000))
	"$bin" --root "$tmp/root" agent --pid 1 --metrics "${METRICS:-full}" --listen "127.0.0.1:$port" --log-level "$level" &
	pid=$!
	until curl -sf "127.0.0.1:$port/readyz" >/dev/null; do sleep 0.2; done
}
