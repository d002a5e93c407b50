#!/usr/bin/env bash
# ctest fixture serve_npm_setup: installs the official `openai` npm client into DIR (cached: a
# second run with the same package list does nothing), for the ds-serve tests that drive the server
# with a real OpenAI client. A failure to reach npm fails those tests; it does not skip them.
set -euo pipefail
DIR=${1:?usage: serve_npm_setup.sh DIR}
PACKAGES=(openai@6.30.1)
STAMP="$DIR/node_modules/.ds-packages"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PACKAGES[*]}" ]; then
  echo "serve_npm_setup: cached in $DIR"
  exit 0
fi
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "serve_npm_setup: FAILED: node and npm are needed for the ds-serve client tests (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name":"ds-serve-test-client","private":true,"type":"module"}' > "$DIR/package.json"
if ! npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}"; then
  echo "serve_npm_setup: FAILED: 'npm install ${PACKAGES[*]}' did not succeed; the ds-serve tests drive the server" \
       "with this client and need the npm registry (check the network / npm config, then rerun ctest)" >&2
  exit 1
fi
echo "${PACKAGES[*]}" > "$STAMP"
echo "serve_npm_setup: installed into $DIR"
