package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/osdcloud/osd/daemon/api"
)

// ValidRoles lists every role, in a stable order.
var ValidRoles = []string{api.RoleCompute, api.RoleControl, api.RoleNetwork, api.RoleStorage}

// ValidateName checks that name is a DNS label (RFC 1123): 1-63 characters of lowercase
// letters, digits and '-', not starting or ending with '-'. api.Member names become k3s
// node names and certificate names, so nothing else is accepted.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("member name is empty, want a DNS label such as node2")
	}
	if len(name) > 63 {
		return fmt.Errorf("member name %q is %d characters long, want at most 63", name, len(name))
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i != 0 && i != len(name)-1:
		case c == '-':
			return fmt.Errorf("member name %q starts or ends with '-', want a DNS label such as node2", name)
		default:
			return fmt.Errorf("member name %q contains %q, want only lowercase letters, digits and '-'", name, c)
		}
	}
	return nil
}

// NormalizeRoles validates roles and returns them sorted without duplicates; no roles
// means compute, what a joining node is usually for.
func NormalizeRoles(roles []string) ([]string, error) {
	if len(roles) == 0 {
		return []string{api.RoleCompute}, nil
	}
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		r = strings.TrimSpace(r)
		if !slices.Contains(ValidRoles, r) {
			return nil, fmt.Errorf("unknown role %q, want one of %s", r, strings.Join(ValidRoles, ", "))
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}
