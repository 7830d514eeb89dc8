package guest

import (
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"strings"
)

// Marker is how every console line of the guest's /init starts.
const Marker = "osd-guest:"

// initScript is the initramfs /init: mount the kernel file systems, load the
// modules in order, bring eth0 up with udhcpc (whose script prints the
// marker with the address), start the listeners and stay up.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /run /tmp /var/run /etc
# stdout and errors to the serial port, which Nova logs (console.log)
[ -c /dev/ttyS0 ] && exec >/dev/ttyS0 2>&1 </dev/null
say() { /bin/osd-say "$@"; }
hostname osd-guest
say "init started, kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime)"
for m in $(cat /etc/osd-modules); do
	insmod "/lib/modules/$m" || say "insmod $m failed"
done
ip link set lo up
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if [ ! -e /sys/class/net/eth0 ]; then
	say "no eth0 (interfaces: $(ls /sys/class/net | tr '\n' ' '))"
else
	ip link set eth0 up
	udhcpc -f -i eth0 -s /etc/udhcpc.script -t 5 -T 2 -A 5 -O mtu -O staticroutes -x hostname:osd-guest >/dev/null 2>&1 &
fi
mkdir -p /www
echo "osd-guest $(uname -r)" > /www/index.html
httpd -p 80 -h /www
nc -ll -p 22 -e /bin/osd-banner &
while :; do sleep 3600; done
`

// udhcpcScript is udhcpc's event script: it sets the address, MTU, routes
// (classless static routes when offered, else the routers) and resolv.conf,
// and prints the marker line ParseConsole reads.
const udhcpcScript = `#!/bin/sh
say() { /bin/osd-say "$@"; }
event=$1
case "$event" in
deconfig)
	ip -4 addr flush dev "$interface"
	ip link set "$interface" up
	;;
leasefail|nak)
	say "$interface no DHCP lease yet ($1)"
	;;
bound|renew)
	[ -n "$mtu" ] && ip link set "$interface" mtu "$mtu"
	ip -4 addr flush dev "$interface"
	ip addr add "$ip/$mask" dev "$interface"
	gw=""
	if [ -n "$staticroutes" ]; then
		set -- $staticroutes
		while [ $# -ge 2 ]; do
			if [ "$1" = "0.0.0.0/0" ]; then gw="$2"; ip route replace default via "$2" dev "$interface"
			else ip route replace "$1" via "$2" dev "$interface"; fi
			shift 2
		done
	elif [ -n "$router" ]; then
		for r in $router; do gw="$r"; ip route replace default via "$r" dev "$interface"; break; done
	fi
	: > /etc/resolv.conf
	for d in $dns; do echo "nameserver $d" >> /etc/resolv.conf; done
	[ -n "$hostname" ] && hostname "$hostname"
	say "$interface $ip/$mask up gateway ${gw:-none} mtu ${mtu:-default}"
	[ "$event" = bound ] && [ ! -e /run/osd-metadata ] && : > /run/osd-metadata && /bin/osd-metadata &
	;;
esac
exit 0
`

// sayScript prints a marker line on the serial port, and on /dev/console
// when that is another device (Nova's command line ends with console=hvc0;
// the last entry of /sys/class/tty/console/active is /dev/console).
const sayScript = `#!/bin/sh
msg="osd-guest: $*"
[ -c /dev/ttyS0 ] && echo "$msg" > /dev/ttyS0 2>/dev/null
case "$(cat /sys/class/tty/console/active 2>/dev/null)" in
*ttyS0) ;;
*) echo "$msg" > /dev/console 2>/dev/null ;;
esac
exit 0
`

// metadataScript reads the server's own uuid from the metadata service (the route to
// 169.254.169.254 comes with the DHCP lease) and prints it, or that it got no answer.
const metadataScript = `#!/bin/sh
say() { /bin/osd-say "$@"; }
# nc, not wget: the static busybox's wget looks up the "http" service through NSS and
# crashes; nc takes the numeric port as it is.
url=http://169.254.169.254/openstack/latest/meta_data.json
i=0
while [ $i -lt 12 ]; do
	if doc=$(printf 'GET /openstack/latest/meta_data.json HTTP/1.0\r\nHost: 169.254.169.254\r\n\r\n' | nc -w 5 169.254.169.254 80 2>/tmp/metadata.err); then
		case "$doc" in
		HTTP/1.[01]\ 200*)
			uuid=$(echo "$doc" | sed -n 's/.*"uuid": *"\([0-9a-f-]*\)".*/\1/p')
			say "metadata uuid ${uuid:-none}"
			exit 0
			;;
		*) echo "$doc" | head -n 1 | tr -d '\r' > /tmp/metadata.err ;;
		esac
	fi
	i=$((i+1))
	sleep 5
done
say "metadata unreachable ($url gave no answer for a minute: $(tail -n 1 /tmp/metadata.err))"
`

// bannerScript answers a TCP connection on port 22 (there is no SSH server).
const bannerScript = `#!/bin/sh
echo "osd-guest $(hostname): TCP works; this test guest has no SSH server"
`

// Module is one kernel module file to put in the initramfs.
type Module struct {
	Name string // e.g. virtio_net
	Data []byte
}

// initrdEntries is the initramfs content: busybox, the scripts and the
// modules (loaded in the given order).
func initrdEntries(busybox []byte, modules []Module) []cpioEntry {
	dir := func(n string) cpioEntry { return cpioEntry{Name: n, Mode: cpioDir | 0o755} }
	e := []cpioEntry{
		dir("bin"), dir("dev"), dir("etc"), dir("lib"), dir("lib/modules"), dir("proc"), dir("sys"), dir("tmp"), dir("run"),
		{Name: "dev/console", Mode: cpioChar | 0o600, RdevMajor: 5, RdevMinor: 1},
		{Name: "dev/null", Mode: cpioChar | 0o666, RdevMajor: 1, RdevMinor: 3},
		{Name: "bin/busybox", Mode: cpioReg | 0o755, Data: busybox},
		{Name: "bin/sh", Mode: cpioSymlink | 0o777, Data: []byte("busybox")},
		{Name: "init", Mode: cpioReg | 0o755, Data: []byte(initScript)},
		{Name: "etc/udhcpc.script", Mode: cpioReg | 0o755, Data: []byte(udhcpcScript)},
		{Name: "bin/osd-say", Mode: cpioReg | 0o755, Data: []byte(sayScript)},
		{Name: "bin/osd-banner", Mode: cpioReg | 0o755, Data: []byte(bannerScript)},
		{Name: "bin/osd-metadata", Mode: cpioReg | 0o755, Data: []byte(metadataScript)},
		{Name: "etc/passwd", Mode: cpioReg | 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		{Name: "etc/group", Mode: cpioReg | 0o644, Data: []byte("root:x:0:\n")},
	}
	var order []string
	for _, m := range modules {
		f := m.Name + ".ko"
		order = append(order, f)
		e = append(e, cpioEntry{Name: path.Join("lib/modules", f), Mode: cpioReg | 0o644, Data: m.Data})
	}
	e = append(e, cpioEntry{Name: "etc/osd-modules", Mode: cpioReg | 0o644, Data: []byte(strings.Join(order, "\n") + "\n")})
	return e
}

// writeInitrd writes the gzip-compressed initramfs.
func writeInitrd(w io.Writer, busybox []byte, modules []Module) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := writeCPIO(zw, initrdEntries(busybox, modules)); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	return zw.Close()
}

// recipeVersion identifies what the initramfs holds besides the packages:
// part of the cache key.
func recipeVersion() string {
	return "guest-v1\n" + initScript + udhcpcScript + sayScript + bannerScript + metadataScript + strings.Join(NetModules, ",")
}
