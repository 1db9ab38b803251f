#!/usr/bin/env bash
# Draws docs/dashboard.png: every panel of the Grafana dashboard
# (deploy/helm/nfstune/files/nfstune-dashboard.json), with the dashboard's own queries, run
# by a real Prometheus on a real agent's /metrics from the lab. Grafana is not packaged for
# Debian and its renderer needs a browser, so hack/dashboard/dashboard.py draws the panels.
#
#   hack/dashboard/png.sh            from the recorded scrape, hack/dashboard/lab-scrape.om.gz
#   hack/dashboard/png.sh --record   boot the lab first and record the scrape anew (about
#                                     10 minutes: lab/guest/dashboard-scrape.sh says what runs)
#
# Needs promtool and prometheus (Debian's prometheus package) and python3-matplotlib; PYTHON
# names the Python that has matplotlib (default python3).
set -euo pipefail
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
om=$here/lab-scrape.om.gz
out=$repo/docs/dashboard.png
dashboard=$repo/deploy/helm/nfstune/files/nfstune-dashboard.json

for cmd in promtool prometheus; do
	command -v "$cmd" >/dev/null || { echo "$cmd missing: apt-get install prometheus" >&2; exit 1; }
done
"$py" -c 'import matplotlib' 2>/dev/null || { echo "matplotlib missing: apt-get install python3-matplotlib" >&2; exit 1; }

if [[ ${1:-} == --record ]]; then
	make -C "$repo" build
	scrape=lab/.cache/dashboard-scrape
	(cd "$repo" && lab/vm.sh -- lab/guest/dashboard-scrape.sh "$scrape")
	"$py" "$here/dashboard.py" openmetrics "$repo/$scrape" "$om"
fi

tmp=$(mktemp -d)
prom=
cleanup() {
	[[ -n $prom ]] && kill "$prom" 2>/dev/null && wait "$prom" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

gunzip -c "$om" >"$tmp/scrape.om"
promtool tsdb create-blocks-from openmetrics "$tmp/scrape.om" "$tmp/tsdb" >/dev/null
# The first and last scrape, in Unix seconds: the last field of every sample line.
read -r start end < <(awk '$1 != "#" { t = $NF; if (min == "" || t < min) min = t; if (t > max) max = t }
	END { print min, max }' "$tmp/scrape.om")

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'global: {}\n' >"$tmp/prometheus.yml"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
	--storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" \
	--log.level=warn >"$tmp/prometheus.log" 2>&1 &
prom=$!
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$port/-/ready" >/dev/null && break
	sleep 0.2
done
curl -fs "http://127.0.0.1:$port/-/ready" >/dev/null || { cat "$tmp/prometheus.log" >&2; exit 1; }

"$py" "$here/dashboard.py" plot "http://127.0.0.1:$port" "$dashboard" "$start" "$end" "$out"
echo "wrote ${out#"$repo"/} from $(grep -c . "$tmp/scrape.om") samples, $start to $end"
