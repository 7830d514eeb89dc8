package cluster

import (
	"context"
	"fmt"
	"strings"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

// ErrHostnameTaken refuses a join from a host whose OS hostname another node has.
var ErrHostnameTaken = sentinel("hostname already taken", rest.ErrConflict)

// maxHostname is the longest hostname RFC 1123 allows.
const maxHostname = 253

// ValidateHostname checks that h is a hostname (RFC 1123): at most 253 characters of
// dot-separated labels, each 1-63 letters, digits and '-', not starting or ending with
// '-'. Errors wrap ErrInvalid (400).
func ValidateHostname(h string) error {
	const fix = "give the joining host a valid hostname (hostnamectl set-hostname NAME) and join again"
	if len(h) > maxHostname {
		return errorf(ErrInvalid, "join request hostname is %d characters long, want at most %d: %s", len(h), maxHostname, fix)
	}
	for _, label := range strings.Split(h, ".") {
		if err := checkHostLabel(label); err != nil {
			return errorf(ErrInvalid, "join request hostname %q is not an RFC 1123 hostname: %w; %s", h, err, fix)
		}
	}
	return nil
}

func checkHostLabel(l string) error {
	switch {
	case l == "":
		return fmt.Errorf("it has an empty label")
	case len(l) > 63:
		return fmt.Errorf("label %q is %d characters long, want at most 63", l, len(l))
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("it contains %q, want only letters, digits, '-' and '.'", c)
		}
	}
	return nil
}

// hostnameConflict decides whether member name may join from a host called hostname
// (pure): not when a node among nodes (the node answering the join and every member)
// has the same hostname, compared without case. OpenStack names each compute host's
// hypervisor and Placement resource provider by its hostname, so a second host of one
// name gets none: it looks up but takes no servers and cannot be removed cleanly. An
// empty hostname (a joiner that sends none) and nodes with none recorded are not
// compared, nor is a node called name (the joiner's own record). completing says the
// joiner is at its last step (its agent already started): it must reset before joining
// again.
func hostnameConflict(name, hostname string, nodes []api.Member, completing bool) error {
	if hostname == "" {
		return nil
	}
	for _, n := range nodes {
		if (n.Name == name && !n.Local) || n.Hostname == "" || !strings.EqualFold(n.Hostname, hostname) {
			continue
		}
		again := "run osd join again with the same token"
		if completing {
			again = "run osd reset on this host, then osd join again with the same token"
		}
		return errorf(ErrHostnameTaken, "this host's hostname %q is also the hostname of %s: OpenStack names each compute host's hypervisor by its hostname, "+
			"so two hosts with one name break scheduling; give this host a unique hostname (hostnamectl set-hostname NAME, "+
			"and add it to /etc/hosts) and %s", hostname, nodeLabel(n), again)
	}
	return nil
}

// nodeLabel names n in messages: "member node2", or "node1 (the node answering this
// join)".
func nodeLabel(n api.Member) string {
	if n.Local {
		return n.Name + " (the node answering this join)"
	}
	return "member " + n.Name
}

// Hostnames implements JoinDeps: this node (named by Local, else "this node") with its
// OS hostname, and every member with the hostname recorded when it joined.
func (s *Service) Hostnames(ctx context.Context) ([]api.Member, error) {
	recs, err := s.db.ListMembers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Member, 0, len(recs)+1)
	if self := s.selfHostname(); self != "" {
		name := "this node"
		if m := s.hooks.Local(); m != nil {
			name = m.Name
		}
		out = append(out, api.Member{Name: name, Hostname: self, Local: true})
	}
	for _, r := range recs {
		out = append(out, api.Member{Name: r.Name, Hostname: r.Hostname})
	}
	return out, nil
}

// selfHostname is this host's OS hostname ("" when it cannot be read).
func (s *Service) selfHostname() string { return s.hooks.Hostname() }

// Release is the OpenStack release this cluster's cloud runs (images.RecordedRelease of
// the host record of the node answering the join).
func (s *Service) Release(ctx context.Context) (string, error) {
	h, err := s.db.Host(ctx)
	if err != nil {
		return "", err
	}
	rel, err := bimages.RecordedRelease(h.Release, h.Deployed())
	return rel.Name, err
}
