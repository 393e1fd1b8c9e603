#!/usr/bin/env bash
# Headless Chromium for the replay report's rendering test (Debian's `chromium` package).
# Idempotent: does nothing when chromium is on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "chromium.sh: chromium is missing and we are not root; install it: apt-get install -y chromium" >&2; exit 2; }
  sudo="sudo"
fi
echo "chromium.sh: installing chromium with apt-get (Debian package chromium)" >&2
$sudo apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "chromium.sh: apt-get installed chromium but it is not on PATH" >&2; exit 2; }
