#!/usr/bin/env bash
# Installs everything osd needs to build, run and be tested on Debian 12 (bookworm), as root.
# Idempotent: packages already present are left alone.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "test/deps.sh: run as root (sudo test/deps.sh)" >&2
	exit 1
fi

# What osd needs on a host: the one list preflight checks and the .deb depends on.
list="$(dirname "$0")/../bootstrap/preflight/packages.txt"
mapfile -t host_packages < <(awk '{ sub(/#.*/, "") } $1 == "depends" || $1 == "recommends" { print $2 }' "$list")
if [ "${#host_packages[@]}" -eq 0 ]; then
	echo "test/deps.sh: no packages in $list" >&2
	exit 1
fi

packages=(
	"${host_packages[@]}"
	# build
	make gcc libc6-dev git pkg-config
	# the tests' tools: process listing, network checks, libvirt's client
	procps util-linux nftables libvirt-clients qemu-utils
	# packaging: the .deb (dpkg-dev, lintian), the snap (squashfs-tools; snapd for snap pack),
	# systemd-analyze for the unit
	dpkg-dev lintian squashfs-tools snapd systemd
	# image building from Debian packages
	busybox-static ca-certificates
	# test guests: a Debian kernel for TCG boots; the OpenStack client for the end-to-end checks
	linux-image-cloud-amd64 cpio python3-openstackclient python3-heatclient iputils-ping curl
	# logging into test guests over SSH; config drives made as Nova makes them (guest boot test)
	openssh-client genisoimage
	# the Geneve test of the userspace datapath turns a port's checksum offload off
	ethtool
	# Horizon checked in a headless browser by the end-to-end test
	chromium
	# OVN's databases, ovn-northd, ovn-controller and ovn-sbctl/ovn-nbctl for the SSL and
	# southbound RBAC tests (netsetup/ovnpki, charts' TestOVNCentralTLS); the cloud runs
	# them from the ovn image, not from the host: their units are disabled below
	ovn-central ovn-host
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "test/deps.sh: installing ${missing[*]}"
	# Keep packaged daemons (containerd, libvirtd, ovs) from being started by the install:
	# osd starts what it needs itself.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 0755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# Debian's containerd unit would run a second containerd next to osd's own.
	if [ -d /run/systemd/system ]; then
		systemctl disable --now containerd.service >/dev/null 2>&1 || true
		# Debian's OVN units would run a second OVN next to the cloud's (no --now: stopping
		# ovn-host's would stop the chassis of a running cloud).
		systemctl disable ovn-host.service ovn-central.service ovn-ovsdb-server-nb.service ovn-ovsdb-server-sb.service >/dev/null 2>&1 || true
	fi
fi

# Go: osd needs Go 1.24 or newer (bookworm ships 1.19).
export PATH=/usr/local/go/bin:$PATH
if ! command -v go >/dev/null; then
	echo "test/deps.sh: Go 1.24 or newer is required: install it to /usr/local/go" >&2
	exit 1
fi
v=$(go env GOVERSION | sed 's/^go//')
case "$v" in
	1.2[4-9]*|1.[3-9][0-9]*) ;;
	*) echo "test/deps.sh: Go $v is too old: osd needs Go 1.24 or newer in /usr/local/go" >&2; exit 1 ;;
esac

# Go modules (the embedded k3s pulls in ~1.3 GB of them; cached after the first run).
cd "$(dirname "$0")/.."
GONOSUMDB=github.com/k3s-io/k3s GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download
echo "test/deps.sh: ok"
