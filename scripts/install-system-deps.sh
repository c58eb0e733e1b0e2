#!/bin/sh
# Install the Debian packages agentlab uses. Required: bubblewrap (the sandbox every task command runs in; without it
# commands are refused). Recommended: passt and nftables (pasta: the user-mode network of a command allowed the network;
# nftables: the rules that keep it to the public Internet; without either it gets out through the bot's HTTP proxy
# only), ripgrep (the agents' grep tool). Optional: chromium (frontend worker screenshots and browser),
# espeak-ng (spoken test fixtures). Skips quietly when they are present or when we cannot install.
need=""
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
command -v pasta >/dev/null 2>&1 || need="$need passt"
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need="$need nftables"
command -v rg >/dev/null 2>&1 || need="$need ripgrep"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v espeak-ng >/dev/null 2>&1 || need="$need espeak-ng"
[ -z "$need" ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "packages missing:$need (install them with apt-get as root; related tests will skip)"
  exit 0
fi
echo "installing Debian packages:$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 \
  || echo "could not install$need; related tests will skip"
exit 0
