package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// secretBytes is the size of a token secret before encoding.
const secretBytes = 32

// maxTokenLen bounds what DecodeToken even looks at.
const maxTokenLen = 8 << 10

// Token is the join token handed to a new member: everything it needs to find the
// cluster, pin its CA before sending anything, and prove it was invited by name.
type Token struct {
	Name        string    `json:"name"`
	Secret      string    `json:"secret"`
	Fingerprint string    `json:"fingerprint"`
	Addresses   []string  `json:"addresses"`
	Expires     time.Time `json:"expires"`
}

// Encode returns the token as base64url (no padding) of its JSON.
func (t Token) Encode() string {
	b, err := json.Marshal(t)
	if err != nil { // a struct of strings and a time cannot fail to encode
		panic(fmt.Sprintf("encode join token: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeToken parses and validates an encoded token. It accepts padded or unpadded
// base64url (and standard base64, which copy-paste through some tools produces), and
// refuses anything incomplete with a message saying what is wrong.
func DecodeToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, errors.New("join token is empty")
	}
	if len(s) > maxTokenLen {
		return Token{}, fmt.Errorf("join token is %d characters long, want at most %d: is this really a token?", len(s), maxTokenLen)
	}
	raw, err := decodeBase64(s)
	if err != nil {
		return Token{}, fmt.Errorf("join token is not valid base64: %w (was it truncated when copied?)", err)
	}
	var t Token
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Token{}, fmt.Errorf("join token does not hold valid JSON: %s (was it truncated when copied?)", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Token{}, errors.New("join token has data after its JSON")
	}
	if err := t.validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "+/") {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

func (t Token) validate() error {
	if t.Name == "" {
		return errors.New("join token is missing the member name")
	}
	if err := ValidateName(t.Name); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	if t.Secret == "" {
		return errors.New("join token is missing the secret")
	}
	if b, err := base64.RawURLEncoding.DecodeString(t.Secret); err != nil || len(b) != secretBytes {
		return fmt.Errorf("join token secret is malformed: want %d bytes of base64url", secretBytes)
	}
	if t.Fingerprint == "" {
		return errors.New("join token is missing the cluster fingerprint")
	}
	if err := ValidateFingerprint(t.Fingerprint); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	if len(t.Addresses) == 0 {
		return errors.New("join token is missing the cluster addresses")
	}
	for _, a := range t.Addresses {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return fmt.Errorf("join token address %q is not host:port", a)
		}
	}
	if t.Expires.IsZero() {
		return errors.New("join token is missing its expiry time")
	}
	return nil
}

// ValidateFingerprint checks a certificate fingerprint: 64 lowercase hex digits.
func ValidateFingerprint(fp string) error {
	if len(fp) != 64 {
		return fmt.Errorf("certificate fingerprint is %d characters long, want 64 hex digits (sha256)", len(fp))
	}
	if _, err := hex.DecodeString(fp); err != nil || strings.ToLower(fp) != fp {
		return fmt.Errorf("certificate fingerprint %q is not lowercase hex", fp)
	}
	return nil
}

// newSecret returns a fresh token secret: 32 bytes from crypto/rand, base64url.
func newSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate join token secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
