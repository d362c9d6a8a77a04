#!/bin/sh
# Entry point of the compose grafana service. Grafana reads no environment in
# dashboard files, so this writes them to /var/lib/grafana/dashboards (the
# provider's path) with the api_url variable defaulting to PRIORWATCH_PUBLIC_URL,
# then starts Grafana as its image does (/run.sh).
set -eu
url="${PRIORWATCH_PUBLIC_URL:-http://localhost:8000}"
case "$url" in
  http://?* | https://?*) ;;
  *) echo "PRIORWATCH_PUBLIC_URL must be an http(s) URL, got '$url'" >&2; exit 1 ;;
esac
case "$url" in
  *[\"\\\|\&[:space:]]*) echo "PRIORWATCH_PUBLIC_URL must not hold quotes, \\, |, & or spaces" >&2; exit 1 ;;
esac
src="${PRIORWATCH_DASHBOARDS_SOURCE:-/etc/grafana/dashboards}"
out="${PRIORWATCH_DASHBOARDS_DIR:-/var/lib/grafana/dashboards}"
mkdir -p "$out"
for file in "$src"/*.json; do
  sed "s|\"http://localhost:8000\"|\"${url%/}\"|g" "$file" > "$out/$(basename "$file")"
done
[ "$#" -gt 0 ] || exit 0
exec "$@"
