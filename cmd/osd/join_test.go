package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/api"
)

func TestReadToken(t *testing.T) {
	for _, c := range []struct {
		arg, stdin, want, wantErr string
	}{
		{"  abc \n", "", "abc", ""},
		{"-", "tok123\nignored\n", "tok123", ""},
		{"-", "tok-no-newline", "tok-no-newline", ""},
		{"-", "\n", "", "no join token on standard input"},
	} {
		got, err := readToken(c.arg, strings.NewReader(c.stdin))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("readToken(%q, %q) = %q, %v, want error %q", c.arg, c.stdin, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("readToken(%q, %q) = %q, %v, want %q", c.arg, c.stdin, got, err, c.want)
		}
	}
}

func TestMemberRow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	beat := now.Add(-42 * time.Second)
	for _, c := range []struct {
		m    api.Member
		want string
	}{
		{api.Member{Name: "node2", Hostname: "edge-2", Address: "10.0.0.2:8443", Roles: []string{"compute", "network"}, NodeState: "Ready", Version: "v1", LastHeartbeat: &beat,
			Tunnel: "geneve 10.0.0.2", Images: "current"},
			"node2\tedge-2\t10.0.0.2:8443\tcompute,network\tReady\tgeneve 10.0.0.2\tcurrent\t-\tv1\t42s ago"},
		{api.Member{Name: "node3", NodeState: "absent"}, "node3\t-\t-\t-\tabsent\t-\t-\t-\t-\tnever"},
		{api.Member{Name: "node1", Local: true, LastHeartbeat: &now, NodeState: "Ready", Maintenance: true, State: []string{"glance", "mariadb"}},
			"node1\t-\t-\t-\tReady,maintenance\t-\t-\tglance,mariadb\t-\t(this node)"},
	} {
		if got := memberRow(c.m, now); got != c.want {
			t.Errorf("memberRow(%s) = %q, want %q", c.m.Name, got, c.want)
		}
	}
}

func TestTokenFrom(t *testing.T) {
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte("tok-from-file\nrest\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		file    string
		want    string
		wantErr string
	}{
		{"file", nil, file, "tok-from-file", ""},
		{"file and argument", []string{"x"}, file, "", "not both"},
		{"missing file", nil, file + ".nope", "", "read the join token"},
		{"nothing", nil, "", "", "no join token"},
		{"argument", []string{"abc"}, "", "abc", ""},
	} {
		got, err := tokenFrom(c.args, c.file, strings.NewReader(""))
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: tokenFrom() = %q, %v, want error %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: tokenFrom() = %q, %v, want %q", c.name, got, err, c.want)
		}
	}
}

func TestWithTokenFile(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string // "" when it must refuse
	}{
		{[]string{"osd", "--state-dir", "/s", "join", "TOK", "--timeout", "5m"}, "osd --state-dir /s join --token-file=/dev/fd/7 --timeout 5m"},
		{[]string{"osd", "join", "TOK", "TOK"}, ""},
		{[]string{"osd", "join", "-"}, ""},
		{[]string{"TOK", "join"}, ""}, // the program name is never the token
	} {
		got, ok := withTokenFile(c.argv, "TOK", 7)
		if c.want == "" {
			if ok {
				t.Errorf("withTokenFile(%q) = %q, want a refusal", c.argv, got)
			}
			continue
		}
		if !ok || strings.Join(got, " ") != c.want {
			t.Errorf("withTokenFile(%q) = %q, %v, want %q", c.argv, got, ok, c.want)
		}
	}
}

// TestPrintTokenFileJoins: what osd cluster add writes to stdout, saved to a file, is what
// osd join --token-file reads (the description goes to stderr).
func TestPrintTokenFileJoins(t *testing.T) {
	var stderr, stdout bytes.Buffer
	printToken(&stderr, &stdout, api.IssuedToken{Name: "node2", Roles: []string{"compute"}, Token: "eyJtoken"})
	if !strings.Contains(stderr.String(), "node2") || strings.Contains(stderr.String(), "eyJtoken") {
		t.Errorf("stderr = %q, want the description without the token", stderr.String())
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := tokenFrom(nil, file, strings.NewReader("")); err != nil || got != "eyJtoken" {
		t.Errorf("tokenFrom(--token-file of osd cluster add's stdout) = %q, %v, want the token", got, err)
	}
}
