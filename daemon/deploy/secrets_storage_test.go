package deploy

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"regexp"
	"testing"
	"time"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkCephxKey checks the layout ceph-authtool writes: 28 bytes, type AES (1), length 16.
func checkCephxKey(v []byte) error {
	raw, err := base64.StdEncoding.DecodeString(string(v))
	if err != nil || len(raw) != 28 || len(v) != 40 {
		return fmt.Errorf("cephx key %q: %d bytes (err %v), want 28 bytes in 40 base64 characters", v, len(raw), err)
	}
	if typ, n := binary.LittleEndian.Uint16(raw[0:]), binary.LittleEndian.Uint16(raw[10:]); typ != 1 || n != 16 {
		return fmt.Errorf("cephx key %q: type %d length %d, want 1 and 16", v, typ, n)
	}
	return nil
}

func TestCephxKey(t *testing.T) {
	// A key from Ceph's documentation, decoded: AES, created 2014-07-07T20:55:35.516097Z.
	secret, _ := base64.StdEncoding.DecodeString("AQBHCbtT6APDHhAA5W00cBchwkQjh3dkKsyPjw==")
	got, err := cephxKey(secret[12:], time.Unix(1404766535, 516097000))
	if err != nil || string(got) != "AQBHCbtT6APDHhAA5W00cBchwkQjh3dkKsyPjw==" {
		t.Errorf("cephxKey(documented secret) = %s, %v, want the documented key", got, err)
	}
	if _, err := cephxKey(make([]byte, 15), time.Now()); err == nil {
		t.Errorf("cephxKey(15 bytes) error = nil, want a length error")
	}
	k, err := generate(FormatCephx, fixedReader(0xab))
	if err != nil || checkCephxKey(k) != nil {
		t.Errorf("generate(cephx) = %s, %v; check: %v", k, err, checkCephxKey(k))
	}
}

func TestUUIDV4(t *testing.T) {
	got, err := generate(FormatUUID, fixedReader(0xff))
	if err != nil || string(got) != "ffffffff-ffff-4fff-bfff-ffffffffffff" {
		t.Errorf("generate(uuid, all ones) = %s, %v, want ffffffff-ffff-4fff-bfff-ffffffffffff", got, err)
	}
	got, _ = generate(FormatUUID, fixedReader(0))
	if !uuidRE.Match(got) {
		t.Errorf("generate(uuid, zeros) = %s, want a version 4 UUID", got)
	}
}

// TestStorageSecrets: every client of Ceph has its own key, and the libvirt secret a uuid.
func TestStorageSecrets(t *testing.T) {
	want := map[string][]string{
		"ceph-cluster":              {"admin-key", "fsid", "mgr-key", "mon-key", "osd-key"},
		"ceph-client-glance":        {"key"},
		"ceph-client-cinder":        {"key", "libvirt-uuid"},
		"ceph-client-cinder-backup": {"key"},
		"cinder-db":                 {"password"},
		"cinder-keystone":           {"password", "memcache-secret-key"},
	}
	found := 0
	for _, s := range DefaultSecrets() {
		keys, ok := want[s.Name]
		if !ok {
			continue
		}
		found++
		if len(s.Keys) != len(keys) {
			t.Errorf("secret %s keys = %v, want %v", s.Name, s.Keys, keys)
		}
		for _, k := range keys {
			if _, ok := s.Keys[k]; !ok {
				t.Errorf("secret %s lacks key %s", s.Name, k)
			}
		}
	}
	if found != len(want) {
		t.Errorf("DefaultSecrets() has %d of the %d storage secrets", found, len(want))
	}
}

type fixedReader byte

func (r fixedReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
