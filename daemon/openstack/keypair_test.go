package openstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestEnsureKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "osd-key")
	pub, created, err := EnsureKeyFile(path)
	if err != nil || !created || !strings.HasPrefix(pub, "ssh-ed25519 ") {
		t.Fatalf("EnsureKeyFile(new) = %q, %v, %v, want a new Ed25519 key", pub, created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode = %v, %v, want 0600", st.Mode().Perm(), err)
	}
	b, _ := os.ReadFile(path)
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil || authorizedKey(signer.PublicKey()) != pub {
		t.Errorf("private key file parses to %v, %v, want the key of %s", signer, err, pub)
	}
	if b, err := os.ReadFile(path + ".pub"); err != nil || !SameKey(string(b), pub) {
		t.Errorf("%s.pub = %q, %v, want %s", path, b, err, pub)
	}
	again, created, err := EnsureKeyFile(path)
	if err != nil || created || again != pub {
		t.Errorf("EnsureKeyFile(again) = %q, %v, %v, want the same key, not made again", again, created, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("dir holds %d files, want the key and its .pub (no temporary file left)", len(ents))
	}
	os.WriteFile(path, []byte("not a key"), 0o600)
	if _, _, err := EnsureKeyFile(path); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("EnsureKeyFile(garbage) error = %v, want one saying to remove it", err)
	}
}

func TestRecordHostKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known_hosts")
	steps := []struct{ ip, key, want string }{
		{"172.24.4.150", "ssh-ed25519 AAAA1", "172.24.4.150 ssh-ed25519 AAAA1\n"},
		{"172.24.4.151", "ssh-ed25519 AAAA2", "172.24.4.150 ssh-ed25519 AAAA1\n172.24.4.151 ssh-ed25519 AAAA2\n"},
		// The floating IP went to another server: its old key goes.
		{"172.24.4.150", "ssh-ed25519 AAAA3", "172.24.4.151 ssh-ed25519 AAAA2\n172.24.4.150 ssh-ed25519 AAAA3\n"},
	}
	for _, s := range steps {
		if err := recordHostKey(path, s.ip, s.key); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != s.want {
			t.Errorf("recordHostKey(%s, %s) left %q, want %q", s.ip, s.key, b, s.want)
		}
	}
}

func TestSameKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"ssh-ed25519 AAAA1", "ssh-ed25519 AAAA1 comment", true},
		{"ssh-ed25519 AAAA1 x", "ssh-ed25519 AAAA2 x", false},
		{"ssh-rsa AAAA1", "ssh-ed25519 AAAA1", false},
		{"", "", false},
	} {
		if got := SameKey(tc.a, tc.b); got != tc.want {
			t.Errorf("SameKey(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
