package openstack

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// HostNetwork probes from the host with ping and ip route (iputils-ping, iproute2).
type HostNetwork struct{}

// Ping sends one echo request and waits half a second for the answer (a guest on this
// host's network answers within milliseconds, even under TCG).
func (HostNetwork) Ping(ctx context.Context, ip string) error {
	out, err := exec.CommandContext(ctx, "ping", "-c1", "-W0.5", "-n", ip).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s: %w: %s", ip, err, lastLines(string(out), 2))
	}
	return nil
}

// Route asks the kernel for its route to ip.
func (HostNetwork) Route(ctx context.Context, ip string) error {
	out, err := exec.CommandContext(ctx, "ip", "-4", "route", "get", ip).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip route get %s: %s", ip, strings.TrimSpace(string(out)))
	}
	return RouteProblem(string(out))
}

// RouteProblem reads `ip route get` output: a route through the default
// gateway instead of br-ex means the floating IP range is not on the host.
func RouteProblem(out string) error {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "dev" {
			if f[i+1] == "br-ex" {
				return nil
			}
			if strings.Contains(out, " via ") {
				return fmt.Errorf("the host routes it via %s through its default gateway, not br-ex", f[i+1])
			}
			return nil // directly connected on another device (an external interface in br-ex's place)
		}
	}
	if strings.Contains(out, "unreachable") || strings.Contains(out, "prohibit") {
		return fmt.Errorf("%s", strings.TrimSpace(out))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
