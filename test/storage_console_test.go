package test

import (
	"crypto/md5"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Typing on a guest's console: the keys go to the guest's keyboard through libvirt
// (virsh send-key, Linux key codes, a US layout), as a person at its console would type;
// what the commands print is sent to the serial port, which Nova logs (console log).

// keyFor is the key (and whether Shift is held) that types r on a US keyboard.
func keyFor(r rune) (string, bool, bool) {
	switch {
	case r >= 'a' && r <= 'z':
		return "KEY_" + strings.ToUpper(string(r)), false, true
	case r >= 'A' && r <= 'Z':
		return "KEY_" + string(r), true, true
	case r >= '1' && r <= '9', r == '0':
		return "KEY_" + string(r), false, true
	}
	plain := map[rune]string{' ': "KEY_SPACE", '-': "KEY_MINUS", '=': "KEY_EQUAL", '/': "KEY_SLASH", '.': "KEY_DOT", ',': "KEY_COMMA",
		';': "KEY_SEMICOLON", '\'': "KEY_APOSTROPHE", '\\': "KEY_BACKSLASH", '[': "KEY_LEFTBRACE", ']': "KEY_RIGHTBRACE", '`': "KEY_GRAVE", '\n': "KEY_ENTER"}
	shifted := map[rune]string{'!': "KEY_1", '@': "KEY_2", '#': "KEY_3", '$': "KEY_4", '%': "KEY_5", '^': "KEY_6", '&': "KEY_7", '*': "KEY_8",
		'(': "KEY_9", ')': "KEY_0", '_': "KEY_MINUS", '+': "KEY_EQUAL", '?': "KEY_SLASH", '>': "KEY_DOT", '<': "KEY_COMMA", ':': "KEY_SEMICOLON",
		'"': "KEY_APOSTROPHE", '|': "KEY_BACKSLASH", '{': "KEY_LEFTBRACE", '}': "KEY_RIGHTBRACE", '~': "KEY_GRAVE"}
	if k, ok := plain[r]; ok {
		return k, false, true
	}
	if k, ok := shifted[r]; ok {
		return k, true, true
	}
	return "", false, false
}

// typeOnConsole types text (newlines press Enter) on the guest's keyboard.
func typeOnConsole(t testing.TB, domain, text string) {
	t.Helper()
	for _, r := range text {
		key, shift, ok := keyFor(r)
		if !ok {
			t.Fatalf("cannot type %q on a US keyboard", r)
		}
		args := []string{"-c", "qemu:///system", "send-key", domain, "--codeset", "linux"}
		if shift {
			args = append(args, "KEY_LEFTSHIFT")
		}
		if out, err := exec.Command("virsh", append(args, key)...).CombinedOutput(); err != nil {
			t.Fatalf("virsh send-key %s %s: %v\n%s", domain, key, err, out)
		}
	}
}

// consoleSession is a root shell on a guest's console, reached by logging in with the
// guest's console password; run types a command whose output goes to the serial port
// between markers, and reads it back from Nova's console log.
type consoleSession struct {
	n              *node
	server, domain string
	seq            int
}

// guestConsole logs in as root on the guest's first virtual console (tty1); it fails
// when the guest offers no console login.
func (n *node) guestConsole(t testing.TB, server, password string) (*consoleSession, error) {
	t.Helper()
	c := &consoleSession{n: n, server: server, domain: n.domain(t, server)}
	typeOnConsole(t, c.domain, "\n")
	time.Sleep(2 * time.Second)
	typeOnConsole(t, c.domain, "root\n")
	time.Sleep(3 * time.Second)
	typeOnConsole(t, c.domain, password+"\n")
	time.Sleep(3 * time.Second)
	out, err := c.try(t, "id -u", time.Minute)
	if err != nil || strings.TrimSpace(out) != "0" {
		return nil, fmt.Errorf("console login as root on %s: id -u = %q, %v", server, out, err)
	}
	return c, nil
}

// run types command on the console with its output redirected to the serial port between
// two marker lines, and returns that output once it is in the console log.
func (c *consoleSession) run(t testing.TB, command string, timeout time.Duration) string {
	t.Helper()
	out, err := c.try(t, command, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *consoleSession) try(t testing.TB, command string, timeout time.Duration) (string, error) {
	t.Helper()
	c.seq++
	begin, end := fmt.Sprintf("osd-e2e-begin-%d", c.seq), fmt.Sprintf("osd-e2e-end-%d", c.seq)
	typeOnConsole(t, c.domain, fmt.Sprintf("(echo %s; %s; echo %s) >/dev/ttyS0 2>&1\n", begin, command, end))
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		log, _ := c.n.openstack("console", "log", "show", c.server)
		log = strings.ReplaceAll(log, "\r", "")
		i := strings.LastIndex(log, "\n"+begin+"\n")
		if i < 0 {
			continue
		}
		rest := log[i+len(begin)+2:]
		if j := strings.Index(rest, "\n"+end); j >= 0 {
			return rest[:j], nil
		} else if strings.HasPrefix(rest, end) {
			return "", nil
		}
	}
	log, _ := c.n.openstack("console", "log", "show", c.server)
	return "", fmt.Errorf("no output of %q on %s's console after %s; console log:\n%s", command, c.server, timeout, tail(log, 20))
}

// guestConsolePassword is the osd-test guest's console password (root and its login user).
const guestConsolePassword = "osd-test"

// guestDisk writes and reads volumes attached to servers inside the guests: typing on the
// console as root. (The host's QEMU is no way round a guest without a console login: its
// qemu-io finds no block backend under a virtio-blk-pci device's id, and a write through
// the disk's node conflicts with the write permission the guest's device keeps unshared.)
type guestDisk struct {
	n        *node
	sessions map[string]*consoleSession
}

const guestDiskBytes = 4 << 20

// pattern is what write puts at the start of a volume: lines of token.
func pattern(token string) []byte {
	line := []byte(token + "\n")
	out := make([]byte, 0, guestDiskBytes+len(line))
	for len(out) < guestDiskBytes {
		out = append(out, line...)
	}
	return out[:guestDiskBytes]
}

func (g *guestDisk) session(t testing.TB, server string) *consoleSession {
	if g.sessions == nil {
		g.sessions = map[string]*consoleSession{}
	}
	if s, ok := g.sessions[server]; ok {
		return s
	}
	s, err := g.n.guestConsole(t, server, guestConsolePassword)
	if err != nil {
		t.Fatal(err)
	}
	g.sessions[server] = s
	return s
}

// device is the guest's shell expression for the disk of volume (Nova gives the disk the
// volume's id, cut to 20 characters, as its serial).
func device(volume string) string {
	return fmt.Sprintf("/dev/$(grep -l %s /sys/block/vd*/serial | cut -d/ -f4)", volume[:20])
}

// write fills the first 4 MiB of the volume attached to server with token's lines and
// returns the md5 of what it wrote.
func (g *guestDisk) write(t testing.TB, server, volume, token string) string {
	t.Helper()
	s := g.session(t, server)
	checkRBDDisk(t, s.domain, volume)
	out := s.run(t, fmt.Sprintf("d=%s; yes %s | head -c %d | dd of=$d bs=1M conv=fsync 2>/dev/null; echo wrote $d", device(volume), token, guestDiskBytes), 3*time.Minute)
	if !strings.Contains(out, "wrote /dev/vd") {
		t.Fatalf("write in %s: %q", server, out)
	}
	return fmt.Sprintf("%x", md5sum(pattern(token)))
}

// sum is the md5 of the first 4 MiB of the volume attached to server, read there.
func (g *guestDisk) sum(t testing.TB, server, volume string) string {
	t.Helper()
	out := g.session(t, server).run(t, fmt.Sprintf("head -c %d %s | md5sum", guestDiskBytes, device(volume)), 3*time.Minute)
	if f := strings.Fields(out); len(f) > 0 {
		return f[0]
	}
	t.Fatalf("md5sum in %s: %q", server, out)
	return ""
}

func md5sum(b []byte) [16]byte { return md5.Sum(b) }
