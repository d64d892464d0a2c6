#!/usr/bin/env bash
# Regenerates the .pb.go files from raetplugin.proto, or with -check fails
# (printing the diff) when the checked-in files are stale. protoc comes from
# Debian's protobuf-compiler; protoc-gen-go and protoc-gen-go-grpc are the
# versions pinned by the tool block of go.mod. The "protoc vX" line of the
# generated header is ignored by -check, so another Debian release's protoc
# does not fail it.
set -euo pipefail
cd "$(dirname "$0")"
command -v protoc >/dev/null || { echo "gen.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
gengo=$(go tool -n protoc-gen-go)
gengrpc=$(go tool -n protoc-gen-go-grpc)
out=.
if [ "${1:-}" = "-check" ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
protoc --plugin=protoc-gen-go="$gengo" --plugin=protoc-gen-go-grpc="$gengrpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	raetplugin.proto
if [ "$out" != . ]; then
	status=0
	for f in raetplugin.pb.go raetplugin_grpc.pb.go; do
		if ! diff -u -I '^// .*protoc  *v[0-9]' "$f" "$out/$f"; then
			status=1
		fi
	done
	if [ $status -ne 0 ]; then
		echo "gen.sh: plugins/proto is stale; run plugins/proto/gen.sh" >&2
	fi
	exit $status
fi
