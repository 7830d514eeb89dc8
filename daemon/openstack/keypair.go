package openstack

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/osdcloud/osd/bootstrap/fsutil"
	"golang.org/x/crypto/ssh"
)

// DefaultKeyName is the keypair osd makes once (day-one) and osd launch uses by default;
// its private key stays on the host (KeyFile), 0600, next to clouds.yaml.
const DefaultKeyName = "osd-key"

// KeyFile is where osd keeps the private key of DefaultKeyName in a state dir (and the
// public key in KeyFile + ".pub").
func KeyFile(stateDir string) string { return filepath.Join(stateDir, DefaultKeyName) }

// KeypairSpec is a keypair day-one makes: a name and an authorized_keys line.
type KeypairSpec struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
}

// Keypair is a Nova keypair.
type Keypair struct {
	Name        string `json:"name"`
	PublicKey   string `json:"public_key"`
	Fingerprint string `json:"fingerprint"`
}

// ListKeypairs lists the keypairs of the user the client logged in as.
func (c *Client) ListKeypairs(ctx context.Context) ([]Keypair, error) {
	var out struct {
		Keypairs []struct {
			Keypair Keypair `json:"keypair"`
		} `json:"keypairs"`
	}
	if err := c.do(ctx, "GET", compute, "os-keypairs", nil, nil, &out); err != nil {
		return nil, err
	}
	kps := make([]Keypair, 0, len(out.Keypairs))
	for _, k := range out.Keypairs {
		kps = append(kps, k.Keypair)
	}
	return kps, nil
}

// ImportKeypair adds a keypair with the given public key.
func (c *Client) ImportKeypair(ctx context.Context, name, publicKey string) error {
	body := map[string]any{"keypair": map[string]string{"name": name, "public_key": publicKey, "type": "ssh"}}
	return c.do(ctx, "POST", compute, "os-keypairs", nil, body, nil)
}

// DeleteKeypair deletes a keypair (a missing one is not an error).
func (c *Client) DeleteKeypair(ctx context.Context, name string) error {
	err := c.do(ctx, "DELETE", compute, "os-keypairs/"+url.PathEscape(name), nil, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// EnsureKeyFile returns the public key (authorized_keys form, without comment) of the
// private key in path, making an Ed25519 key there first (crypto/rand, 0600, written
// whole or not at all, with path.pub beside it) when there is none. created says it made one.
func EnsureKeyFile(path string) (publicKey string, created bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return "", false, fmt.Errorf("private key %s: %w (remove it and run osd init to make a new one)", path, err)
		}
		return authorizedKey(signer.PublicKey()), false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", false, err
	}
	block, err := ssh.MarshalPrivateKey(priv, DefaultKeyName)
	if err != nil {
		return "", false, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", false, err
	}
	publicKey = authorizedKey(sp)
	if err := fsutil.WriteFileAtomic(path+".pub", []byte(publicKey+" "+DefaultKeyName+"\n"), 0o644); err != nil {
		return "", false, err
	}
	if err := fsutil.WriteFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", false, err
	}
	return publicKey, true, nil
}

func authorizedKey(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// SameKey says whether two authorized_keys lines hold the same key (comments aside).
func SameKey(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	return len(fa) >= 2 && len(fb) >= 2 && fa[0] == fb[0] && fa[1] == fb[1]
}
