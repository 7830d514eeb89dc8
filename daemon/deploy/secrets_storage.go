package deploy

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

const (
	// FormatCephx is a Ceph (cephx) secret key as ceph-authtool --gen-print-key writes it:
	// base64 of a little-endian header (type 1 = AES, creation time seconds and
	// nanoseconds, length 16) followed by 16 random bytes (40 characters).
	FormatCephx KeyFormat = "cephx"
	// FormatUUID is a random (version 4) UUID in its canonical text form, for identifiers
	// that must be unique per deployment (a Ceph cluster's fsid, a libvirt secret's uuid).
	FormatUUID KeyFormat = "uuid"
)

// storageSecrets are the Secrets of block storage: the Ceph cluster's identity and
// daemon keys, one cephx key per client (each pod gets only the keys it uses), and Cinder's
// database and Keystone users. Made whatever the backend: unused ones cost nothing and a
// later switch to Ceph finds them.
func storageSecrets() []SecretSpec {
	return []SecretSpec{
		{Name: "ceph-cluster", Keys: map[string]KeyFormat{"fsid": FormatUUID, "mon-key": FormatCephx, "admin-key": FormatCephx, "mgr-key": FormatCephx, "osd-key": FormatCephx}},
		{Name: "ceph-client-glance", Keys: map[string]KeyFormat{"key": FormatCephx}},
		// Nova attaches volumes as the user Cinder's connection info names (client.cinder):
		// nova-compute defines a libvirt secret of this uuid holding the key, so the host's
		// QEMU opens RBD volumes with it.
		{Name: "ceph-client-cinder", Keys: map[string]KeyFormat{"key": FormatCephx, "libvirt-uuid": FormatUUID}},
		{Name: "ceph-client-cinder-backup", Keys: map[string]KeyFormat{"key": FormatCephx}},
		{Name: "cinder-db", Keys: map[string]KeyFormat{"password": FormatHex}},
		{Name: "cinder-keystone", Keys: map[string]KeyFormat{"password": FormatHex, "memcache-secret-key": FormatHex}},
	}
}

// cephxKey encodes secret (16 bytes) as a cephx key created at t.
func cephxKey(secret []byte, t time.Time) ([]byte, error) {
	if len(secret) != 16 {
		return nil, fmt.Errorf("cephx key: want 16 secret bytes, got %d", len(secret))
	}
	b := make([]byte, 12, 28)
	binary.LittleEndian.PutUint16(b[0:], 1) // CEPH_CRYPTO_AES
	binary.LittleEndian.PutUint32(b[2:], uint32(t.Unix()))
	binary.LittleEndian.PutUint32(b[6:], uint32(t.Nanosecond()))
	binary.LittleEndian.PutUint16(b[10:], 16)
	b = append(b, secret...)
	return []byte(base64.StdEncoding.EncodeToString(b)), nil
}

// uuidV4 formats 16 random bytes as a version 4, variant 1 UUID.
func uuidV4(b []byte) ([]byte, error) {
	if len(b) != 16 {
		return nil, fmt.Errorf("uuid: want 16 random bytes, got %d", len(b))
	}
	u := append([]byte(nil), b...)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return []byte(fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])), nil
}
