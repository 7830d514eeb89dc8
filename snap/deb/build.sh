#!/usr/bin/env bash
# Builds osd's .deb with Debian's own tools (dpkg-shlibdeps, dpkg-gencontrol, dpkg-deb),
# offline, from a built osd binary:
#   snap/deb/build.sh VERSION BINARY OUTDIR MAINTAINER
# Depends and Recommends come from bootstrap/preflight/packages.txt (the list preflight
# checks), plus the shared libraries the binary links. SOURCE_DATE_EPOCH dates the
# changelog, the man pages and the files. DEB_COMPRESS and DEB_COMPRESS_LEVEL pick the
# compression (default xz at level 1: a minute where level 6 takes several for the 250 MB
# binary; lintian refuses zstd).
set -euo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 VERSION BINARY OUTDIR MAINTAINER" >&2
	exit 2
fi
for tool in dpkg-shlibdeps:dpkg-dev dpkg-gencontrol:dpkg-dev dpkg-deb:dpkg; do
	if ! command -v "${tool%%:*}" >/dev/null; then
		echo "$0: ${tool%%:*} not found: install Debian's ${tool#*:} (test/deps.sh does)" >&2
		exit 1
	fi
done
version=$1 bin=$(realpath "$2") out=$3 maintainer=$4
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${SOURCE_DATE_EPOCH:=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH
umask 022

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
pkg=$work/debian/osd # the package's tree
mkdir -p "$pkg/DEBIAN"

# The files.
install -D -m 0755 "$bin" "$pkg/usr/bin/osd"
install -D -m 0644 "$here/osd.service" "$pkg/lib/systemd/system/osd.service"
install -d "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
	"$pkg/usr/share/fish/vendor_completions.d" "$pkg/usr/share/man/man1" "$pkg/usr/share/doc/osd"
"$bin" completion bash >"$pkg/usr/share/bash-completion/completions/osd"
"$bin" completion zsh >"$pkg/usr/share/zsh/vendor-completions/_osd"
"$bin" completion fish >"$pkg/usr/share/fish/vendor_completions.d/osd.fish"
"$bin" man-pages "$work/man"
for m in "$work"/man/*.1; do
	gzip -9n <"$m" >"$pkg/usr/share/man/man1/$(basename "$m").gz"
done
install -m 0644 "$here/copyright" "$pkg/usr/share/doc/osd/copyright"
date=$(date -R -u -d "@$SOURCE_DATE_EPOCH")
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat >"$work/debian/changelog" <<EOT
osd ($version) unstable; urgency=medium

  * Built from commit $commit of the osd repository.

 -- $maintainer  $date
EOT
gzip -9n <"$work/debian/changelog" >"$pkg/usr/share/doc/osd/changelog.gz"

# The maintainer scripts, which need to know their own version.
for s in preinst postinst prerm postrm; do
	sed "s/@VERSION@/$version/g" "$here/$s" >"$pkg/DEBIAN/$s"
	chmod 0755 "$pkg/DEBIAN/$s"
done

# The control file: dependencies from the shared package list and from the binary's
# shared libraries.
list() { awk -v kind="$1" '{ sub(/#.*/, "") } $1 == kind { printf "%s%s", sep, $2; sep = ", " }' "$top/bootstrap/preflight/packages.txt"; }
sed "s|@MAINTAINER@|$maintainer|" "$here/control" >"$work/debian/control"
{
	echo "osd:Depends=$(list depends)"
	echo "osd:Recommends=$(list recommends)"
} >"$work/debian/osd.substvars"
(
	cd "$work"
	dpkg-shlibdeps -Tdebian/osd.substvars debian/osd/usr/bin/osd
	dpkg-gencontrol -v"$version" -Tdebian/osd.substvars -Pdebian/osd -posd
)
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/md5sums"
find "$pkg" -type d -exec chmod 0755 {} +

mkdir -p "$out"
deb="$out/osd_${version}_amd64.deb"
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" -z"${DEB_COMPRESS_LEVEL:-1}" --build "$pkg" "$deb" >/dev/null
echo "$deb"
