package images

import (
	"fmt"
	"sort"
	"strings"
)

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// accountLines returns the /etc/group and /etc/passwd lines for a recipe's
// groups and users, with supplementary members on the group lines.
func accountLines(r Recipe) (groups, passwd []string) {
	type grp struct {
		gid     int
		members []string
	}
	gs := map[string]*grp{}
	for _, g := range r.Groups {
		gs[g.Name] = &grp{gid: g.GID}
	}
	for _, u := range r.Users {
		if _, ok := gs[u.Name]; !ok {
			gs[u.Name] = &grp{gid: u.GID}
		}
	}
	for _, u := range r.Users {
		for _, g := range u.Groups {
			if gg, ok := gs[g]; ok {
				gg.members = append(gg.members, u.Name)
			}
		}
	}
	names := make([]string, 0, len(gs))
	for n := range gs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return gs[names[i]].gid < gs[names[j]].gid })
	for _, n := range names {
		groups = append(groups, fmt.Sprintf("%s:x:%d:%s", n, gs[n].gid, strings.Join(gs[n].members, ",")))
	}
	for _, u := range r.Users {
		home, shell := u.Home, u.Shell
		if home == "" {
			home = "/nonexistent"
		}
		if shell == "" {
			shell = "/usr/sbin/nologin"
		}
		passwd = append(passwd, fmt.Sprintf("%s:x:%d:%d::%s:%s", u.Name, u.UID, u.GID, home, shell))
	}
	return groups, passwd
}

// essentialHook is the script mmdebstrap runs (as --essential-hook, with the
// root filesystem as $1) after the Essential:yes packages are installed and
// before the recipe's packages: it creates the recipe's groups and users with
// their fixed IDs (appending to /etc/group, /etc/passwd and, when present,
// the shadow files; an existing entry with another ID fails the build),
// makes the build host's name resolvable (cinder-common's postinst needs it)
// and preseeds debconf.
func essentialHook(r Recipe, hostname string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nset -eu\nroot=\"$1\"\n")
	b.WriteString(`addent() { # file name line
	f="$root/etc/$1"
	[ -f "$f" ] || return 0
	old=$(grep "^$2:" "$f" || true)
	if [ -z "$old" ]; then printf '%s\n' "$3" >>"$f"; return 0; fi
	id3=$(printf '%s' "$3" | cut -d: -f3); idold=$(printf '%s' "$old" | cut -d: -f3)
	case "$1" in shadow|gshadow) return 0;; esac
	if [ "$id3" != "$idold" ]; then echo "osd: $1 entry $2 exists with id $idold, want $id3" >&2; exit 1; fi
	[ "$1" = group ] || return 0
	# A group a lower layer made: add this image's members to it.
	have=$(printf '%s' "$old" | cut -d: -f4)
	for m in $(printf '%s' "$3" | cut -d: -f4 | tr , ' '); do
		case ",$have," in *",$m,"*) ;; *) have="${have:+$have,}$m" ;; esac
	done
	new="$(printf '%s' "$old" | cut -d: -f1-3):$have"
	[ "$new" = "$old" ] || sed -i "s|^$2:.*|$new|" "$f"
}
`)
	groups, passwd := accountLines(r)
	for _, g := range groups {
		name := strings.SplitN(g, ":", 2)[0]
		fmt.Fprintf(&b, "addent group %s %s\naddent gshadow %s %s\n", name, shellQuote(g), name, shellQuote(name+":!::"))
	}
	for _, p := range passwd {
		name := strings.SplitN(p, ":", 2)[0]
		fmt.Fprintf(&b, "addent passwd %s %s\naddent shadow %s %s\n", name, shellQuote(p), name, shellQuote(name+":*::0:99999:7:::"))
	}
	fmt.Fprintf(&b, "printf '127.0.0.1\\tlocalhost\\n127.0.1.1\\t%%s\\n' %s >\"$root/etc/hosts\"\n", shellQuote(hostname))
	if len(r.Debconf) > 0 {
		b.WriteString("chroot \"$root\" debconf-set-selections <<'OSD_DEBCONF'\n")
		for _, l := range r.Debconf {
			b.WriteString(l + "\n")
		}
		b.WriteString("OSD_DEBCONF\n")
	}
	return b.String()
}

// customizeHook runs after every package is installed: it fails the build if
// mmdebstrap's policy-rc.d (exit 101: start no services) was not in place,
// records the installed packages to pkgList (outside the root filesystem)
// and resets /etc/hosts to a host-independent one.
func customizeHook(pkgList string) string {
	return fmt.Sprintf(`#!/bin/sh
set -eu
root="$1"
if [ ! -x "$root/usr/sbin/policy-rc.d" ]; then echo "osd: policy-rc.d missing during the build" >&2; exit 1; fi
rc=0; "$root/usr/sbin/policy-rc.d" x start || rc=$?
if [ "$rc" != 101 ]; then echo "osd: policy-rc.d exits $rc, want 101" >&2; exit 1; fi
chroot "$root" dpkg-query -W -f '${Package}\t${Version}\n' >%s
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
`, shellQuote(pkgList))
}
