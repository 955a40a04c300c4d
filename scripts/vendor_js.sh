#!/usr/bin/env bash
# Copy the pinned widget/math JavaScript (package.json) into book/_vendor_js/ so the built book works offline.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules/@jupyter-widgets/html-manager ] || [ ! -d node_modules/mathjax ] || [ ! -f node_modules/requirejs/require.js ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

dest=book/_vendor_js
tmp=$(mktemp -d book/.vendor_js.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# html-manager: embed-amd.js plus the chunks and icon fonts it loads (source maps left out: 11 MB). The fonts
# (Font Awesome 5, hashed names) are looked up next to the AMD modules' URLs, which book/assets/widgets-setup.js
# points at _static/html-manager/.
mkdir -p "$tmp/html-manager"
find node_modules/@jupyter-widgets/html-manager/dist -maxdepth 1 -type f ! -name '*.map' -exec cp {} "$tmp/html-manager/" \;
if ! compgen -G "$tmp/html-manager/*.woff2" >/dev/null; then
  echo "vendor_js.sh: no icon fonts (*.woff2) in @jupyter-widgets/html-manager/dist; widget icons would 404" >&2
  exit 1
fi
cp node_modules/requirejs/require.js "$tmp/require.js"
# MathJax finds its fonts relative to the script: mathjax/output/chtml/fonts/woff-v2
mkdir -p "$tmp/mathjax/output/chtml"
cp node_modules/mathjax/es5/tex-mml-chtml.js "$tmp/mathjax/"
cp -r node_modules/mathjax/es5/output/chtml/fonts "$tmp/mathjax/output/chtml/"

rm -rf "$dest"
mv "$tmp" "$dest"
chmod 755 "$dest"
trap - EXIT
echo "vendored JS into $dest ($(du -sh "$dest" | cut -f1))"
