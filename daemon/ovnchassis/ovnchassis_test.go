package ovnchassis

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osdcloud/osd/netsetup/ovnpki"
)

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p, _ := ovnpki.NewCA(now)
	ca, err := ovnpki.ParseCA(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	sign := func(ctx context.Context, id, csr string) ([]byte, []byte, error) {
		calls++
		return SignWith(func(context.Context) (*ovnpki.CA, error) { return ca, nil }, func() time.Time { return now })(ctx, id, csr)
	}
	dir := filepath.Join(t.TempDir(), DirName)
	const id = "0b5e6f3c-2d1e-4c8a-9f7b-1a2b3c4d5e6f"
	if wrote, err := Ensure(ctx, dir, id, sign, now); err != nil || !wrote {
		t.Fatalf("Ensure() = %v, %v, want a certificate written", wrote, err)
	}
	if Due(dir, id, now) {
		t.Errorf("Due() after Ensure = true")
	}
	// A key that is not the certificate's (a crash between the two writes) is due.
	keyPEM, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	otherDir := filepath.Join(t.TempDir(), DirName)
	if _, err := Ensure(ctx, otherDir, id, sign, now); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := os.ReadFile(filepath.Join(otherDir, KeyFile))
	os.WriteFile(filepath.Join(dir, KeyFile), otherKey, 0o600)
	if !Due(dir, id, now) {
		t.Errorf("Due() with another key than the certificate's = false, want true")
	}
	os.WriteFile(filepath.Join(dir, KeyFile), keyPEM, 0o600)
	if fi, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, %v, want 0600", fi.Mode().Perm(), err)
	}
	if c, _ := os.ReadFile(filepath.Join(dir, CAFile)); !bytes.Equal(c, ca.CertPEM) {
		t.Errorf("ca.crt is not the OVN CA")
	}
	before, _ := os.ReadFile(filepath.Join(dir, CertFile))
	for _, tt := range []struct {
		name  string
		id    string
		at    time.Time
		wrote bool
	}{
		{"current", id, now.Add(time.Hour), false},
		{"before renewal", id, now.Add(ovnpki.ChassisLifetime*2/3 - 2*time.Hour), false},
		{"another system-id", "node1", now, true},
		{"near its end", "node1", now.Add(ovnpki.ChassisLifetime*2/3 + 2*time.Hour), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := calls
			wrote, err := Ensure(ctx, dir, tt.id, sign, tt.at)
			if err != nil || wrote != tt.wrote || (calls > n) != tt.wrote {
				t.Errorf("Ensure(%s) = %v, %v (signer called %v), want %v", tt.id, wrote, err, calls > n, tt.wrote)
			}
		})
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CertFile)); bytes.Equal(before, after) {
		t.Errorf("the certificate did not change with the system-id")
	}
	// What a signer returns is checked: another name, or another CA, is not written.
	other, _ := ovnpki.NewCA(now)
	otherCA, _ := ovnpki.ParseCA(other.CertPEM, other.KeyPEM)
	for name, bad := range map[string]Signer{
		"another name": func(ctx context.Context, id, csr string) ([]byte, []byte, error) {
			return SignWith(func(context.Context) (*ovnpki.CA, error) { return ca, nil }, time.Now)(ctx, "someone-else", csr)
		},
		"another CA": func(ctx context.Context, id, csr string) ([]byte, []byte, error) {
			cert, _, err := SignWith(func(context.Context) (*ovnpki.CA, error) { return otherCA, nil }, time.Now)(ctx, id, csr)
			return cert, ca.CertPEM, err
		},
		"an error": func(context.Context, string, string) ([]byte, []byte, error) { return nil, nil, errors.New("no") },
	} {
		t.Run(name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "c")
			if wrote, err := Ensure(ctx, d, "node2", bad, time.Now()); err == nil || wrote {
				t.Errorf("Ensure() with %s = %v, %v, want an error", name, wrote, err)
			}
			if _, err := os.Stat(filepath.Join(d, CertFile)); err == nil {
				t.Errorf("a certificate was written")
			}
		})
	}
	if _, err := Ensure(ctx, dir, "a/b", sign, now); err == nil {
		t.Errorf("Ensure() with system-id a/b = nil error")
	}
}
