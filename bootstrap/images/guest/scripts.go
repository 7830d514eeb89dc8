package guest

// The guest's login: the user the SSH key from the metadata is installed for, and the
// console password (of that user and of root). SSH accepts keys only, and not for root.
const (
	LoginUser       = "osd"
	ConsolePassword = "osd-test"
)

// CommandLine is the guest kernel's command line (the machine image's os_command_line):
// the console on the serial port Nova logs as well as the screen, and a reboot on panic.
// Tried and dropped: acpi=noirq (PCI interrupt links from the BIOS's table instead of
// ACPI's methods: about 1 s less boot under QEMU without KVM, but a volume hot-plugged
// later never showed up in the guest).
const CommandLine = "console=tty0 console=ttyS0 panic=-1"

// initScript is the initramfs /init: mount the kernel file systems, set the users up,
// load the modules in order and bring eth0 up with udhcpc as soon as it exists (whose
// script prints the marker with the address and then reads the metadata service), start
// the SSH server, look for a config drive, serve HTTP on port 80, a console login on tty1,
// and stay up.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
# and at the applets' usual places too (/sbin/ifconfig, /usr/bin/wget ...), as CirrOS
/bin/busybox --install -s 2>/dev/null
export PATH=/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /run /tmp /var/run /var/log /etc
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
# stdout and errors to the serial port, which Nova logs (console.log)
[ -c /dev/ttyS0 ] && exec >/dev/ttyS0 2>&1 </dev/null
say() { /bin/osd-say "$@"; }
hostname osd-guest
say "init started, kernel $(uname -r), uptime $(cut -d' ' -f1 /proc/uptime)"
ip link set lo up
# The login user's home first: the metadata, read once eth0 has a lease, installs its keys.
/bin/osd-users
# eth0 is brought up as soon as the network driver made it, while the other modules load.
net() {
	ip link set eth0 up
	udhcpc -f -i eth0 -s /etc/udhcpc.script -t 5 -T 2 -A 5 -O mtu -O staticroutes -x hostname:osd-guest >/dev/null 2>&1 &
	net=up
}
net=""
for m in $(cat /etc/osd-modules); do
	insmod "/lib/modules/$m" || say "insmod $m failed"
	[ -z "$net" ] && [ -e /sys/class/net/eth0 ] && net
done
i=0
while [ -z "$net" ] && [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if [ -z "$net" ]; then
	if [ -e /sys/class/net/eth0 ]; then net; else say "no eth0 (interfaces: $(ls /sys/class/net | tr '\n' ' '))"; fi
fi
# The ACPI power button (Nova's soft power off: stop, rescue, resize) powers off. acpid
# opens /dev/input/event0, 1, ... once: wait until the node of the button's is there.
(
	i=0
	while [ ! -e /dev/input/event0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
	acpid -c /etc/acpi -l /var/log/acpid.log || say "acpid failed: $(tail -n 1 /var/log/acpid.log)"
) &
/bin/osd-sshd &
/bin/osd-configdrive &
mkdir -p /www
echo "osd-guest $(uname -r)" > /www/index.html
httpd -p 80 -h /www
if [ -c /dev/tty1 ]; then
	(while :; do setsid getty 38400 tty1; sleep 1; done) &
fi
while :; do sleep 3600; done
`

// powerButtonScript is busybox acpid's handler of the power button (event PWRF): the
// guest powers off at once (its /init is no init system to tell).
const powerButtonScript = `#!/bin/sh
/bin/osd-say "power button pressed: powering off"
sync
poweroff -f
`

// usersScript writes /etc/shadow with the console password (hashed with a fresh salt) and
// makes the login user's home.
const usersScript = `#!/bin/sh
hash=$(mkpasswd -m sha512 '` + ConsolePassword + `')
{
	echo "root:$hash:19000:0:99999:7:::"
	echo "` + LoginUser + `:$hash:19000:0:99999:7:::"
} > /etc/shadow
chmod 0600 /etc/shadow
mkdir -p /home/` + LoginUser + `/.ssh /root
chown -R 1000:1000 /home/` + LoginUser + `
chmod 0755 /home/` + LoginUser + `
chmod 0700 /home/` + LoginUser + `/.ssh
`

// sshdScript makes an Ed25519 host key, prints its public half on the console (so that a
// client can pin it) and runs dropbear: keys only (-s), no root (-w), restarted if it ends.
// dropbear offers RSA and ECDSA host keys as well, whatever keys it has: -R makes them on
// the first connection that picks one (without it, a client preferring RSA, as Go's does,
// makes it fail an assertion and drop the connection).
const sshdScript = `#!/bin/sh
say() { /bin/osd-say "$@"; }
key=/etc/dropbear/dropbear_ed25519_host_key
mkdir -p /etc/dropbear
if ! dropbearkey -t ed25519 -f $key >/tmp/dropbearkey.log 2>&1; then
	say "ssh host key generation failed: $(tail -n 1 /tmp/dropbearkey.log)"
	exit 1
fi
say "ssh host key $(dropbearkey -y -f $key 2>/dev/null | grep '^ssh-ed25519 ' | cut -d' ' -f1,2)"
while :; do
	say "ssh server listening on port 22, uptime $(cut -d' ' -f1 /proc/uptime)"
	dropbear -F -E -s -w -R -p 22 -P /run/dropbear.pid 2>>/var/log/dropbear.log
	say "ssh server ended ($(tail -n 1 /var/log/dropbear.log)), restarting"
	sleep 1
done
`

// configDriveScript looks for a config drive (label config-2, an ISO 9660 CD-ROM as Nova
// makes it by default) for 15 s, mounts it, prints what it holds and applies it.
const configDriveScript = `#!/bin/sh
say() { /bin/osd-say "$@"; }
i=0
dev=""
while [ $i -lt 30 ]; do
	dev=$(findfs LABEL=config-2 2>/dev/null) && break
	dev=""
	i=$((i+1))
	sleep 0.5
done
if [ -z "$dev" ]; then
	say "no config drive"
	exit 0
fi
mkdir -p /mnt/config
if ! mount -o ro "$dev" /mnt/config 2>/tmp/configdrive.err; then
	say "config drive config-2 on $dev: mount failed: $(tail -n 1 /tmp/configdrive.err)"
	exit 1
fi
doc=/mnt/config/openstack/latest/meta_data.json
if [ ! -f $doc ]; then
	say "config drive config-2 on $dev: no openstack/latest/meta_data.json ($(ls /mnt/config | tr '\n' ' '))"
	exit 1
fi
uuid=$(tr -d '\n' < $doc | sed -n 's/.*"uuid": *"\([0-9a-f-]*\)".*/\1/p')
say "config drive config-2 on $dev: uuid ${uuid:-none}"
/bin/osd-apply-meta "config drive" $doc
`

// applyMetaScript applies an OpenStack meta_data.json (from the config drive or the
// metadata service): the hostname (its first label) and the public SSH keys, installed
// for the login user. It prints what it did.
const applyMetaScript = `#!/bin/sh
say() { /bin/osd-say "$@"; }
src=$1
doc=$(tr -d '\n' < "$2")
host=$(echo "$doc" | sed -n 's/.*"hostname": *"\([^"]*\)".*/\1/p' | cut -d. -f1 | tr -cd 'A-Za-z0-9-')
if [ -n "$host" ]; then
	hostname "$host"
	echo "$host" > /etc/hostname
	say "hostname $host (from the $src)"
fi
keys=$(echo "$doc" | sed -n 's/.*"public_keys": *{\([^}]*\)}.*/\1/p' | sed 's/", *"/"\n"/g' | sed -n 's/^ *"\([^"]*\)": *"\(.*\)" *$/\1 \2/p' | sed 's/\\n$//')
[ -n "$keys" ] || exit 0
home=/home/` + LoginUser + `
echo "$keys" | cut -d' ' -f2- > $home/.ssh/authorized_keys.new
chown 1000:1000 $home/.ssh/authorized_keys.new
chmod 0600 $home/.ssh/authorized_keys.new
mv $home/.ssh/authorized_keys.new $home/.ssh/authorized_keys
say "ssh keys $(echo "$keys" | cut -d' ' -f1 | tr '\n' ' ')installed for ` + LoginUser + ` (from the $src)"
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
	[ -n "$hostname" ] && [ ! -e /etc/hostname ] && hostname "$hostname"
	say "$interface $ip/$mask up gateway ${gw:-none} mtu ${mtu:-default} uptime $(cut -d' ' -f1 /proc/uptime)"
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

// metadataScript reads the server's meta_data.json from the metadata service (the route
// to 169.254.169.254 comes with the DHCP lease), prints its uuid, or that it got no
// answer, and applies it (hostname, SSH keys).
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
			echo "$doc" > /run/meta_data.json
			uuid=$(tr -d '\n' < /run/meta_data.json | sed -n 's/.*"uuid": *"\([0-9a-f-]*\)".*/\1/p')
			say "metadata uuid ${uuid:-none}"
			/bin/osd-apply-meta "metadata service" /run/meta_data.json
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

// The guest's account files: root and the login user (uid 1000), both with /bin/sh,
// which dropbear requires to be listed in /etc/shells.
const (
	passwdFile   = "root:x:0:0:root:/root:/bin/sh\n" + LoginUser + ":x:1000:1000:" + LoginUser + ":/home/" + LoginUser + ":/bin/sh\n"
	groupFile    = "root:x:0:\ntty:x:5:\n" + LoginUser + ":x:1000:\n"
	shellsFile   = "/bin/sh\n"
	nsswitchFile = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
)

// scripts are the executable files of the initramfs besides /init, by path.
var scripts = []struct{ path, text string }{
	{"etc/udhcpc.script", udhcpcScript},
	{"bin/osd-say", sayScript},
	{"bin/osd-metadata", metadataScript},
	{"bin/osd-users", usersScript},
	{"bin/osd-sshd", sshdScript},
	{"bin/osd-configdrive", configDriveScript},
	{"bin/osd-apply-meta", applyMetaScript},
	{"etc/acpi/PWRF/00000080", powerButtonScript},
}

// sudoScript is /usr/bin/sudo as CirrOS offers it to its user: any command as root, no
// password. The program at asRootPath (set-user-ID root, executable by the login user's
// group only) makes every ID root and executes the command; busybox itself cannot (it
// gives root up in every applet that does not need it, and its /etc/busybox.conf makes
// busybox 1.35's shell crash).
const sudoScript = `#!/bin/sh
shell= login=
while [ $# -gt 0 ]; do
	case "$1" in
	-n|-E|-H|-S|-k|-P|--non-interactive|--preserve-env) shift ;;
	-u|--user) [ "$2" = root ] || [ "$2" = 0 ] || { echo "sudo: only root is offered" >&2; exit 1; }; shift 2 ;;
	-i|--login) shell=1 login=-l; shift ;;
	-s|--shell) shell=1; shift ;;
	--) shift; break ;;
	-*) echo "sudo: option $1 is not supported" >&2; exit 1 ;;
	*) break ;;
	esac
done
if [ -n "$shell" ] && [ $# -gt 0 ]; then
	set -- /bin/sh $login -c "$*"
elif [ $# -eq 0 ]; then
	set -- /bin/sh $login
fi
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root LOGNAME=root
case "$1" in
*/*) ;;
*) p=$(command -v "$1") || { echo "sudo: $1: command not found" >&2; exit 1; }
	case "$p" in
	/*) shift; set -- "$p" "$@" ;;
	*) set -- /bin/busybox "$@" ;; # an applet the shell runs itself
	esac ;;
esac
exec /` + asRootPath + ` "$@"
`
