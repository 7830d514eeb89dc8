package openstack

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// EnableComputeService lets the scheduler place servers on host's nova-compute again. It
// reports whether the service was disabled before (false, nil when host has none).
func (c *Client) EnableComputeService(ctx context.Context, host string) (bool, error) {
	svcs, err := c.ComputeServices(ctx, host)
	if err != nil {
		return false, err
	}
	if len(svcs) == 0 || svcs[0].Status == "enabled" {
		return false, nil
	}
	body := map[string]string{"host": host, "binary": "nova-compute"}
	return true, c.do(ctx, "PUT", compute, "os-services/enable", nil, body, nil)
}

// ResourceProvider is a Placement resource provider.
type ResourceProvider struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

// ResourceProviders lists the providers called name ("" = every provider).
func (c *Client) ResourceProviders(ctx context.Context, name string) ([]ResourceProvider, error) {
	var out struct {
		Providers []ResourceProvider `json:"resource_providers"`
	}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	err := c.do(ctx, "GET", placement, "resource_providers", q, nil, &out)
	return out.Providers, err
}

// HostCleanup is what ForgetComputeHost removed.
type HostCleanup struct {
	Services  int // nova-compute services deleted
	Providers int // Placement resource providers deleted (those Nova left)
}

// String says what was removed, for logs and answers.
func (h HostCleanup) String() string {
	return fmt.Sprintf("%d nova-compute services, %d resource providers", h.Services, h.Providers)
}

// ForgetComputeHost deletes host's nova-compute service (Nova then deletes its compute
// nodes, so the hypervisor goes from the list, and their resource providers), then any
// resource provider still called host. Call it once nova-compute no longer runs there:
// a running one registers itself again at its next periodic update. Nova refuses (409)
// while servers are still on the host.
func (c *Client) ForgetComputeHost(ctx context.Context, host string) (HostCleanup, error) {
	var done HostCleanup
	svcs, err := c.ComputeServices(ctx, host)
	if err != nil {
		return done, err
	}
	for _, s := range svcs {
		if s.Host != host {
			continue
		}
		id := strings.Trim(string(s.ID), `"`)
		if id == "" {
			return done, fmt.Errorf("nova-compute service of %s has no id", host)
		}
		if err := c.do(ctx, "DELETE", compute, "os-services/"+url.PathEscape(id), nil, nil, nil); err != nil && !IsNotFound(err) {
			return done, fmt.Errorf("delete the nova-compute service of %s: %w", host, err)
		}
		done.Services++
	}
	rps, err := c.ResourceProviders(ctx, host)
	if err != nil {
		return done, err
	}
	for _, rp := range rps {
		if rp.Name != host {
			continue
		}
		if err := c.do(ctx, "DELETE", placement, "resource_providers/"+url.PathEscape(rp.UUID), nil, nil, nil); err != nil && !IsNotFound(err) {
			return done, fmt.Errorf("delete resource provider %s of %s: %w", rp.UUID, host, err)
		}
		done.Providers++
	}
	return done, nil
}
