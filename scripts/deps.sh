#!/usr/bin/env bash
# Installs what `make test` needs when it is missing: Debian packages via
# apt-get when running as root, otherwise it says exactly what to install.
set -euo pipefail

need=()
command -v go >/dev/null || { echo "deps: Go 1.26 is required (https://go.dev/dl/)"; exit 1; }
# -race needs cgo and a C compiler.
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v git >/dev/null || need+=(git)
# raetdump: live capture (cgo, libpcap) and the Wireshark dissector's tests (tshark).
[ -e /usr/include/pcap/pcap.h ] || need+=(libpcap-dev)
command -v tshark >/dev/null || need+=(tshark)
# raetdump -flow's test renders its SVG with headless Chromium (scripts/chromium.sh).
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
# The plugin protocol's generated code is checked against protoc.
command -v protoc >/dev/null || need+=(protobuf-compiler)
# bench/peers (its smoke test is part of make test): ZeroMQ through cgo.
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -e /usr/include/zmq.h ] || need+=(libzmq3-dev)
# The multi-host road test: network namespaces, veth and nftables (root only).
if [ "$(id -u)" -eq 0 ]; then
	command -v ip >/dev/null || need+=(iproute2)
	command -v nft >/dev/null || need+=(nftables)
fi

if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
	apt-get install -y -qq "${need[@]}"
else
	echo "deps: missing packages; install them with:"
	echo "  sudo apt-get install -y ${need[*]}"
	exit 1
fi
