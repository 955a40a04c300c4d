#!/usr/bin/env bash
# Render a built book page to PNG with headless Chromium (not needed by the tests).
# Usage: scripts/screenshot.sh [PAGE.html] [OUT.png] [HEIGHT]
#   PAGE defaults to book/_build/html/index.html, OUT to screenshot.png, HEIGHT to 2000.
set -euo pipefail
page=${1:-book/_build/html/index.html}
out=${2:-screenshot.png}
height=${3:-2000}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "no chromium found; install it with: apt-get install -y chromium" >&2
  exit 1
fi
[ -f "$page" ] || { echo "no such page: $page (run make book first)" >&2; exit 1; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,"$height" \
  --virtual-time-budget=8000 --screenshot="$(realpath -m "$out")" "file://$(realpath "$page")" 2>/dev/null
echo "wrote $out"
