#!/bin/sh
# The frontend worker's browser: chrome-devtools-mcp, pinned, into the bot's own .tools/ folder (never
# global; gitignored), where node, npm and Chromium exist. Never fatal: without it the frontend worker keeps
# `screenshot`, `agentlab doctor` says so, and the browser's tests skip. The version is agents/tools/browser.py's.
VERSION=1.11.0
DIR="${BROWSER_TOOLS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.tools}"
for tool in node npm chromium; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "browser for the frontend worker skipped: $tool is not installed (the worker keeps screenshot)"
    exit 0
  fi
done
if grep -q "\"version\": \"$VERSION\"" "$DIR/node_modules/chrome-devtools-mcp/package.json" 2>/dev/null; then
  exit 0
fi
mkdir -p "$DIR"
echo "installing chrome-devtools-mcp@$VERSION into $DIR"
npm install --prefix "$DIR" --prefer-offline --no-audit --no-fund --ignore-scripts --save-exact \
  "chrome-devtools-mcp@$VERSION" >/dev/null 2>&1 \
  || echo "could not install chrome-devtools-mcp@$VERSION; the frontend worker keeps screenshot"
exit 0
