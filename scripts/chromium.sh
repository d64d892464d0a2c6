#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium, installing Debian's
# chromium with apt-get when it is missing and this runs as root (as CI
# does); otherwise says what to install and fails. raetdump's -flow test
# (cmd/raetdump, TestFlowChromium) renders its SVG with it.
set -euo pipefail
for c in chromium chromium-browser; do
	if p=$(command -v "$c"); then
		echo "$p"
		exit 0
	fi
done
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "chromium.sh: installing chromium" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq chromium >&2
	command -v chromium
	exit 0
fi
echo "chromium.sh: chromium is missing; install it with: sudo apt-get install -y chromium" >&2
exit 1
