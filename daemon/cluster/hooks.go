package cluster

import (
	"context"
	"errors"
	"os"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/rest"
)

// Hooks are what the cluster's server side asks the rest of the daemon: the cluster's
// Kubernetes (node states, agent credentials, admission, removal, maintenance), the cloud
// (what listings add), the OVN chassis CA, this host's hostname and its firewall. The
// membership resource implements them (members.Service); NoHooks is a daemon with none of
// that. Errors wrap rest sentinels where the API answers them.
type Hooks interface {
	// AgentCredential issues the credential node name's k3s agent registers with.
	AgentCredential(ctx context.Context, name string) (AgentCredential, error)
	// NodeStates gives every Kubernetes node's state (api.NodeReady, api.NodeNotReady)
	// by name, as the cluster's Kubernetes sees it.
	NodeStates(ctx context.Context) (map[string]string, error)
	// Local describes this daemon as the first entry of listings (nil: none).
	Local() *api.Member
	// RemoveNode takes a member's node out of Kubernetes before its record goes, and
	// makes sure a node of that name cannot register again with what it kept: it refuses
	// (rest.ErrConflict) while VMs run on it unless force.
	RemoveNode(ctx context.Context, name string, force bool) error
	// Admit runs once member name has completed its join: it gives its node the labels
	// of roles and drops its agent credentials. An error fails the completion, which the
	// joiner retries.
	Admit(ctx context.Context, name string, roles []string) error
	// TokenIssued runs when a join token is issued for name (an operator's decision to
	// let a node of that name in, again after a removal); an error revokes the token.
	TokenIssued(ctx context.Context, name string) error
	// TokenDropped runs when the join token of name can no longer be used before its
	// join completed (revoked): it drops the node's agent credentials.
	TokenDropped(ctx context.Context, name string) error
	// SignChassis signs member's OVN chassis certificate for systemID (its Open
	// vSwitch's) and the key of csrPEM; it returns the certificate and the OVN CA.
	SignChassis(ctx context.Context, member, systemID, csrPEM string) (certPEM, caPEM []byte, err error)
	// Maintenance puts node name into maintenance (on) or takes it out.
	Maintenance(ctx context.Context, name string, on bool) error
	// Describe completes listings with what Kubernetes and the cloud know of each node:
	// maintenance, tunnel endpoint, images, state held.
	Describe(ctx context.Context, members []api.Member)
	// Hostname is this host's OS hostname ("" when unknown), which a joining host's must
	// differ from.
	Hostname() string
	// Peers opens the host firewall to addresses (add: a joiner whose join was accepted,
	// before it gets its Kubernetes credential) or closes it (remove: a removed member's).
	Peers(ctx context.Context, add, remove []string) error
}

// NoHooks are the Hooks of a daemon with no Kubernetes, cloud or firewall (tests; the
// routes' descriptions): listings hold the cluster's records alone, node states are
// unknown, agent credentials, maintenance and chassis certificates are refused, and the
// rest does nothing. Embed it to answer some hooks only.
type NoHooks struct{}

// AgentCredential implements Hooks: there is no Kubernetes server here.
func (NoHooks) AgentCredential(context.Context, string) (AgentCredential, error) {
	return AgentCredential{}, errors.New("no kubernetes server in this daemon")
}

// NodeStates implements Hooks: unknown.
func (NoHooks) NodeStates(context.Context) (map[string]string, error) {
	return nil, errors.New("no Kubernetes here")
}

// Local implements Hooks: this daemon is not listed.
func (NoHooks) Local() *api.Member { return nil }

// RemoveNode implements Hooks: nothing to take out.
func (NoHooks) RemoveNode(context.Context, string, bool) error { return nil }

// Admit implements Hooks: nothing to admit to.
func (NoHooks) Admit(context.Context, string, []string) error { return nil }

// TokenIssued implements Hooks: nothing to do.
func (NoHooks) TokenIssued(context.Context, string) error { return nil }

// TokenDropped implements Hooks: no credential was issued.
func (NoHooks) TokenDropped(context.Context, string) error { return nil }

// SignChassis implements Hooks: refused (503).
func (NoHooks) SignChassis(context.Context, string, string, string) ([]byte, []byte, error) {
	return nil, nil, rest.Errorf(rest.ErrNotReady, "this daemon does not sign OVN chassis certificates")
}

// Maintenance implements Hooks: refused (503).
func (NoHooks) Maintenance(context.Context, string, bool) error {
	return rest.Errorf(rest.ErrNotReady, "maintenance needs the cluster's Kubernetes: run osd init first")
}

// Describe implements Hooks: nothing to add.
func (NoHooks) Describe(context.Context, []api.Member) {}

// Hostname implements Hooks: the OS hostname.
func (NoHooks) Hostname() string {
	h, _ := os.Hostname()
	return h
}

// Peers implements Hooks: no firewall to open.
func (NoHooks) Peers(context.Context, []string, []string) error { return nil }
