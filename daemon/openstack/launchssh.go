package openstack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"github.com/osdcloud/osd/bootstrap/images/guest"
)

// KnownHostsFile is where osd records the host keys of the test servers it launched, in
// a state dir (the ssh command osd launch prints names it).
func KnownHostsFile(stateDir string) string { return filepath.Join(stateDir, "known_hosts") }

// SSHCommand is the ssh command that logs in to a test server at ip with osd's key,
// trusting only the host key osd recorded for it.
func SSHCommand(keyFile, knownHosts, ip string) string {
	return fmt.Sprintf("ssh -i %s -o UserKnownHostsFile=%s %s@%s", keyFile, knownHosts, guest.LoginUser, ip)
}

// reachBySSH completes res for a server that answers ping: how to reach it and, for the
// test image with osd's own key, an SSH login (host key pinned from the console) and
// the ssh command that does it.
func (l Launcher) reachBySSH(ctx context.Context, res *LaunchResult, tg LaunchTarget, con guest.Console, start time.Time, emit func(string)) {
	consoleLog := "console log: openstack console log show " + res.ID
	res.Reach = fmt.Sprintf("ping %s; %s", res.FloatingIP, consoleLog)
	if con.SSHHostKey == "" {
		// Another image: its own user, the keypair's private key.
		res.Reach = fmt.Sprintf("ping %s; ssh to %s as the image's user with the private key of keypair %s (port 22 must be open in its security group); %s",
			res.FloatingIP, res.FloatingIP, tg.Request.Key, consoleLog)
		return
	}
	res.Login = fmt.Sprintf("user %s, password %s (console only: SSH takes keys)", guest.LoginUser, guest.ConsolePassword)
	if tg.Request.Key != DefaultKeyName || l.KeyFile == "" || l.KnownHosts == "" {
		res.SSH = fmt.Sprintf("ssh -i PRIVATE-KEY-OF-%s %s@%s", tg.Request.Key, guest.LoginUser, res.FloatingIP)
		return
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(con.SSHHostKey))
	if err != nil {
		emit(fmt.Sprintf("server %s: the host key on its console does not parse: %v", res.Name, err))
		return
	}
	if err := recordHostKey(l.KnownHosts, res.FloatingIP, con.SSHHostKey); err != nil {
		emit(fmt.Sprintf("server %s: record its host key in %s: %v", res.Name, l.KnownHosts, err))
		return
	}
	res.SSH = SSHCommand(l.KeyFile, l.KnownHosts, res.FloatingIP)
	keyPEM, err := os.ReadFile(l.KeyFile)
	if err != nil {
		emit(fmt.Sprintf("server %s: %v", res.Name, err))
		return
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		emit(fmt.Sprintf("server %s: private key %s: %v", res.Name, l.KeyFile, err))
		return
	}
	timeout := l.SSHTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	var last error
	for deadline := time.Now().Add(timeout); ; {
		out, err := l.Probe.SSH(ctx, res.FloatingIP, guest.LoginUser, signer, hostKey, "hostname")
		if err == nil {
			res.SSHIn = time.Since(start).Round(100 * time.Millisecond).String()
			emit(fmt.Sprintf("server %s: logged in over SSH as %s (%s after create; its hostname: %s)", res.Name, guest.LoginUser, res.SSHIn, strings.TrimSpace(out)))
			return
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(l.poll()):
		}
	}
	emit(fmt.Sprintf("server %s: no SSH login within %s: %v", res.Name, timeout, last))
}

var knownHostsMu sync.Mutex

// recordHostKey makes path say that ip has key (an authorized_keys-form public key),
// replacing what it said of ip before (floating IPs are reused by other servers).
func recordHostKey(path, ip, key string) error {
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	var kept bytes.Buffer
	if b, err := os.ReadFile(path); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == ip {
				continue
			}
			kept.WriteString(sc.Text() + "\n")
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	kept.WriteString(ip + " " + key + "\n")
	return fsutil.WriteFileAtomic(path, kept.Bytes(), 0o644)
}

// SSH logs in to ip:22 as user with key, accepting only hostKey, and runs command.
func (HostNetwork) SSH(ctx context.Context, ip, user string, key ssh.Signer, hostKey ssh.PublicKey, command string) (string, error) {
	// Only the pinned key's algorithm: a server may offer others it has no key for yet.
	cfg := &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.FixedHostKey(hostKey),
		HostKeyAlgorithms: []string{hostKey.Type()}, Timeout: 5 * time.Second}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "22"))
	if err != nil {
		return "", err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	cc, chans, reqs, err := ssh.NewClientConn(conn, ip+":22", cfg)
	if err != nil {
		conn.Close()
		return "", err
	}
	client := ssh.NewClient(cc, chans, reqs)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(command)
	return string(out), err
}
