#!/usr/bin/env bash
# Builds osd's snap offline, without snapcraft, from a built osd binary:
#   snap/local/build.sh VERSION BINARY OUTDIR
# The tree is what snapcraft would prime: bin/osd, bin/osd-service, the bash completion,
# meta/snap.yaml derived from snap/snapcraft.yaml and the hooks of snap/hooks. It is
# packed with Debian's squashfs-tools as snapd packs snaps (xz, no fragments, owned by
# root, no xattrs) and, where snapd's snap command is installed, checked with snap pack.
set -euo pipefail

if [ $# -ne 3 ]; then
	echo "usage: $0 VERSION BINARY OUTDIR" >&2
	exit 2
fi
if ! command -v mksquashfs >/dev/null; then
	echo "$0: mksquashfs not found: install Debian's squashfs-tools (test/deps.sh does)" >&2
	exit 1
fi
version=$1 bin=$(realpath "$2") out=$3
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${SOURCE_DATE_EPOCH:=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
umask 022

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prime=$work/prime
install -D -m 0755 "$bin" "$prime/bin/osd"
install -D -m 0755 "$here/osd-service" "$prime/bin/osd-service"
install -d "$prime/usr/share/bash-completion/completions" "$prime/meta/hooks"
"$bin" completion bash >"$prime/usr/share/bash-completion/completions/osd"
(cd "$top" && go run ./snap/local/snapmeta -version "$version" snap/snapcraft.yaml) >"$prime/meta/snap.yaml"
install -m 0755 "$top"/snap/hooks/* "$prime/meta/hooks/"
# snapd needs every file readable by all.
chmod -R a+rX "$prime"

if command -v snap >/dev/null; then
	snap pack --check-skeleton "$prime" >/dev/null
fi
mkdir -p "$out"
s="$out/osd_${version}_amd64.snap"
rm -f "$s"
mksquashfs "$prime" "$s" -noappend -comp xz -no-fragments -all-root -no-xattrs -quiet >/dev/null
echo "$s"
