package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// releases is a deployment step's detail: one item a release, as the daemon sends it.
func releases(states map[string]string) string {
	names := []string{"ceph", "cinder", "coredns", "glance", "heat", "horizon", "keystone", "mariadb", "memcached", "neutron", "nova", "ovn", "placement", "rabbitmq"}
	var items []string
	for _, n := range names {
		st := states[n]
		if st == "" {
			st = "waiting (waiting for image openstack to be built)"
		}
		items = append(items, n+" "+st)
	}
	return strings.Join(items, "\n")
}

// TestProgressNotTerminalPrintsChanges: with output that is not a terminal, a repeated
// detail prints nothing again and a change of one release prints that release's line only.
func TestProgressNotTerminalPrintsChanges(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf}
	p.step("deploy")
	first := releases(nil)
	for range 44 {
		p.waiting(first)
	}
	p.waiting(releases(map[string]string{"mariadb": "installing"}))
	p.waiting(releases(map[string]string{"mariadb": "installing"}))
	p.waiting(releases(map[string]string{"mariadb": "Ready", "rabbitmq": "installing"}))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{"deploy ..."}
	for _, item := range strings.Split(first, "\n") {
		want = append(want, "  waiting: "+item)
	}
	want = append(want, "  waiting: mariadb installing", "  waiting: mariadb Ready", "  waiting: rabbitmq installing")
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("progress output =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range lines {
		if len(l) > 120 {
			t.Errorf("progress line of %d characters: %q", len(l), l)
		}
	}
	// A new step prints its items again.
	buf.Reset()
	p.step("launch")
	p.waiting("waiting for the server")
	if got := buf.String(); got != "launch ...\n  waiting: waiting for the server\n" {
		t.Errorf("after a new step: %q", got)
	}
}

// TestProgressTerminalOneLine: on a terminal the items are one line, overwritten in place.
func TestProgressTerminalOneLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true}
	p.step("deploy")
	p.waiting("a Ready\nb installing")
	if got := buf.String(); strings.Count(got, "\n") != 0 || !strings.Contains(got, "a Ready, b installing") {
		t.Errorf("terminal progress = %q, want one line with the items joined", got)
	}
}

func TestChangedItems(t *testing.T) {
	seen := map[string]string{}
	for _, tt := range []struct {
		why  string
		want []string
	}{
		{"", nil},
		{"a x\nb y", []string{"a x", "b y"}},
		{"a x\nb y", nil},
		{"a z\nb y\n", []string{"a z"}},
		{"last pass: boom", []string{"last pass: boom"}},
		{"last pass: boom", nil},
	} {
		if got := changedItems(seen, tt.why); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("changedItems(%q) = %q, want %q", tt.why, got, tt.want)
		}
	}
}
