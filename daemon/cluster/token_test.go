package cluster

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validToken(t testing.TB) Token {
	t.Helper()
	secret, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	return Token{
		Name:        "node2",
		Secret:      secret,
		Fingerprint: strings.Repeat("ab", 32),
		Addresses:   []string{"10.0.0.1:7443", "[fd00::1]:7443"},
		Expires:     time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC),
	}
}

func encodeJSON(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestTokenRoundTrip(t *testing.T) {
	tok := validToken(t)
	enc := tok.Encode()
	if strings.ContainsAny(enc, "+/=") {
		t.Errorf("Encode() = %q, want unpadded base64url", enc)
	}
	for _, variant := range []string{enc, " " + enc + "\n", enc + "==", toStd(enc)} {
		got, err := DecodeToken(variant)
		if err != nil || !reflect.DeepEqual(got, tok) {
			t.Errorf("DecodeToken(%.20q...) = %+v, %v, want %+v", variant, got, err, tok)
		}
	}
}

func toStd(s string) string {
	return strings.NewReplacer("-", "+", "_", "/").Replace(s)
}

func TestDecodeTokenRefuses(t *testing.T) {
	tok := validToken(t)
	with := func(f func(m map[string]any)) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(mustJSON(tok)), &m)
		f(m)
		return encodeJSON(m)
	}
	enc := tok.Encode()
	cases := []struct {
		name  string
		input string
		want  string
	}{
		{"empty", "", "join token is empty"},
		{"garbage", "not a token!!", "join token is not valid base64"},
		{"truncated", enc[:len(enc)/2], "truncated"},
		{"one char short", enc[:len(enc)-1], "join token"},
		{"json array", encodeJSON([]int{1}), "join token does not hold valid JSON"},
		{"trailing data", base64.RawURLEncoding.EncodeToString([]byte(mustJSON(tok) + " {}")), "data after its JSON"},
		{"unknown field", with(func(m map[string]any) { m["admin"] = true }), `unknown field "admin"`},
		{"missing name", with(func(m map[string]any) { delete(m, "name") }), "missing the member name"},
		{"bad name", with(func(m map[string]any) { m["name"] = "Node_2" }), "member name"},
		{"missing secret", with(func(m map[string]any) { delete(m, "secret") }), "missing the secret"},
		{"short secret", with(func(m map[string]any) { m["secret"] = "abc" }), "secret is malformed"},
		{"missing fingerprint", with(func(m map[string]any) { delete(m, "fingerprint") }), "missing the cluster fingerprint"},
		{"short fingerprint", with(func(m map[string]any) { m["fingerprint"] = "abcd" }), "want 64 hex digits"},
		{"uppercase fingerprint", with(func(m map[string]any) { m["fingerprint"] = strings.Repeat("AB", 32) }), "not lowercase hex"},
		{"non-hex fingerprint", with(func(m map[string]any) { m["fingerprint"] = strings.Repeat("zz", 32) }), "not lowercase hex"},
		{"missing addresses", with(func(m map[string]any) { delete(m, "addresses") }), "missing the cluster addresses"},
		{"address without port", with(func(m map[string]any) { m["addresses"] = []string{"10.0.0.1"} }), "is not host:port"},
		{"missing expiry", with(func(m map[string]any) { delete(m, "expires") }), "missing its expiry"},
		{"bad expiry", with(func(m map[string]any) { m["expires"] = "tomorrow" }), "join token does not hold valid JSON"},
		{"too long", strings.Repeat("A", maxTokenLen+1), "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeToken(c.input)
			if err == nil {
				t.Fatalf("DecodeToken(%s) = %+v, nil, want an error containing %q", c.name, got, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("DecodeToken(%s) = %q, want it to contain %q", c.name, err, c.want)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzDecodeToken checks that DecodeToken never panics and that whatever it accepts is
// valid and survives a round trip.
func FuzzDecodeToken(f *testing.F) {
	tok := validToken(f)
	enc := tok.Encode()
	f.Add(enc)
	f.Add(enc[:len(enc)/2])
	f.Add(toStd(enc) + "==")
	f.Add("")
	f.Add("e30")    // {}
	f.Add("bnVsbA") // null
	f.Add(encodeJSON(map[string]any{"name": "a", "secret": tok.Secret, "fingerprint": tok.Fingerprint, "addresses": []string{":1"}, "expires": "2026-01-01T00:00:00Z"}))
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeToken(s)
		if err != nil {
			return
		}
		if verr := got.validate(); verr != nil {
			t.Fatalf("DecodeToken(%q) accepted an invalid token: %v", s, verr)
		}
		again, err := DecodeToken(got.Encode())
		if err != nil || !reflect.DeepEqual(again.Encode(), got.Encode()) {
			t.Fatalf("DecodeToken(Encode(%+v)) = %+v, %v, want the same token", got, again, err)
		}
	})
}

func TestValidateName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"node2", true},
		{"a", true},
		{"n-1", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"-node", false},
		{"node-", false},
		{"Node", false},
		{"node_2", false},
		{"node.example", false},
		{"nöde", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := ValidateName(c.name); (err == nil) != c.ok {
				t.Errorf("ValidateName(%q) = %v, want ok %v", c.name, err, c.ok)
			}
		})
	}
}

func TestNormalizeRoles(t *testing.T) {
	cases := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{nil, []string{"compute"}, ""},
		{[]string{"network", "compute", "network"}, []string{"compute", "network"}, ""},
		{[]string{"storage", "control"}, []string{"control", "storage"}, ""},
		{[]string{"compute", "gpu"}, nil, `unknown role "gpu", want one of compute, control, network, storage`},
	}
	for _, c := range cases {
		got, err := NormalizeRoles(c.in)
		if c.wantErr != "" {
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("NormalizeRoles(%v) = %v, %v, want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("NormalizeRoles(%v) = %v, %v, want %v", c.in, got, err, c.want)
		}
	}
}
