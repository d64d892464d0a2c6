#!/usr/bin/env bash
# Runs tshark with the RAET dissector raetgen writes from the spec
# (docs/wireshark/raet.lua): road packets on UDP port 7530 and, by
# heuristic, on any port; lane pages in raet-go's lane capture records.
#
#   scripts/tshark-raet.sh -r capture.pcapng
#   scripts/tshark-raet.sh -r capture.pcapng -V -Y raet.error
#   scripts/tshark-raet.sh -r capture.pcapng -T fields -e raet.tk -e raet.pk -e raet.si -e raet.ti
#
# To use it in Wireshark, copy the file to ~/.local/lib/wireshark/plugins/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v tshark >/dev/null || { echo "tshark-raet: tshark is not installed (Debian: apt-get install tshark)" >&2; exit 1; }
exec tshark -X "lua_script:$root/docs/wireshark/raet.lua" "$@"
