package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
)

func newInitCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	var req api.InitRequest
	var profile bool
	var storageSize string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Bring this host up as an osd cloud (idempotent: re-run it at any time)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd init")
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			if err := parseStorageSize(storageSize, &req); err != nil {
				return err
			}
			unlock, err := client.LockInit(g.stateDir)
			if err != nil {
				return err
			}
			defer unlock()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			p := newProgress(os.Stdout)
			p.profile = profile
			return runInit(ctx, g, p, req)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Minute, "give up waiting after this long (the daemon keeps converging; a re-run follows it)")
	cmd.Flags().StringVar(&req.ExternalInterface, "external-interface", "", "move this NIC into br-ex (rolled back if the host loses connectivity) instead of an isolated NATed external network")
	cmd.Flags().StringVar(&req.ExternalCIDR, "external-cidr", "", "the isolated external network (default 172.24.4.0/24)")
	cmd.Flags().StringVar(&req.TunnelInterface, "tunnel-interface", "", "the interface that reaches the other nodes, for Geneve tunnels: on the userspace OVS datapath it moves into the bridge br-phy with its addresses (rolled back if the host loses connectivity); auto: the one holding the node's address; none: no bridge")
	cmd.Flags().BoolVar(&req.KubernetesOnly, "kubernetes-only", false, "stop once the host and its embedded Kubernetes node are ready (no OpenStack)")
	cmd.Flags().BoolVar(&profile, "profile", false, "at the end, print where the time went: every step, image and release by phase, and the critical path")
	cmd.Flags().StringVar(&req.Release, "release", "", "the OpenStack release of a new cloud, by codename or series (zed, the default, or epoxy: the daemon refuses one it does not deploy, naming those it does); a cloud keeps the release it was deployed with")
	addStorageFlags(cmd, &req, &storageSize)
	return cmd
}

func runInit(ctx context.Context, g *globals, p *progress, req api.InitRequest) error {
	c := g.client()
	p.step("osd daemon")
	if err := ensureDaemon(ctx, g, c); err != nil {
		p.fail(err)
		return exitError{1}
	}
	p.ok("running")
	if _, _, err := c.Init(ctx, req); err != nil {
		return err
	}
	shown := 0 // steps already printed as finished
	for {
		st, err := c.InitState(ctx)
		if err != nil {
			return err
		}
		for shown < len(st.Steps) {
			e := st.Steps[shown]
			if !e.Done || e.RetryIn > 0 {
				if p.name != e.Step {
					p.step(e.Step)
				}
				if e.RetryIn > 0 {
					p.waiting(fmt.Sprintf("attempt %d failed: %s; trying again in %s", e.Attempt, e.Error, e.RetryIn.Round(time.Second)))
				}
				break
			}
			if p.name != e.Step {
				p.step(e.Step)
			}
			if e.Error != "" {
				p.fail(errors.New(e.Error))
			} else {
				msg := "unchanged"
				if e.Changed {
					msg = "changed"
				}
				if e.Detail != "" {
					msg += ": " + e.Detail
				}
				p.okTook(msg, e.Took)
			}
			shown++
		}
		if (st.State == api.ConvergeSucceeded || st.State == api.ConvergeFailed) && p.profile && st.Profile != nil {
			defer func() {
				fmt.Fprintf(p.w, "\nprofile (times from the start of the run):\n")
				render(p.w, "table", st.Profile, profileTable(st.Profile))
			}()
		}
		switch st.State {
		case api.ConvergeSucceeded:
			p.done()
			fmt.Fprintf(p.w, "\nosd is up.\n")
			clouds := filepath.Join(g.stateDir, "clouds.yaml")
			if _, err := os.Stat(clouds); err == nil {
				fmt.Fprintf(p.w, "OpenStack admin credentials: %s (cloud \"osd\") and %s (0600).\n", clouds, filepath.Join(g.stateDir, "admin-openrc"))
				fmt.Fprintf(p.w, "Try: OS_CLIENT_CONFIG_FILE=%s OS_CLOUD=osd openstack server list\n", clouds)
				fmt.Fprintf(p.w, "Boot a test server and reach it: osd launch\n")
			}
			if st.Dashboard != "" {
				fmt.Fprintf(p.w, "Horizon: %s (user admin, the password is OS_PASSWORD in %s)\n", st.Dashboard, filepath.Join(g.stateDir, "admin-openrc"))
			}
			fmt.Fprintf(p.w, "Kubernetes admin config: %s (0600). Try: osd status; osd kubectl get pods -A\n", filepath.Join(g.stateDir, "kubeconfig"))
			return nil
		case api.ConvergeFailed:
			for _, f := range st.Findings {
				if f.Status == api.FindingFail {
					fmt.Fprintf(p.w, "FAILED  preflight %s: %s\n        fix: %s\n", f.Check, f.Message, f.Fix)
				}
			}
			fmt.Fprintf(p.w, "osd init failed: %s\nFix the cause and run osd init again: it resumes where it stopped.\n", st.Error)
			return exitError{1}
		}
		if shown < len(st.Steps) && st.Detail != "" && st.Steps[shown].RetryIn == 0 {
			p.waiting(st.Detail)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(p.w, "\ngave up waiting: %v; the daemon keeps converging (osd status shows where it stands; osd init continues)\n", ctx.Err())
			return exitError{1}
		case <-time.After(followInterval(time.Since(p.start))):
		}
	}
}

// lockReleased reports, once process pid no longer holds the state dir's daemon lock,
// that it released it (nil while it holds it).
func lockReleased(stateDir string, pid int) func() error {
	return func() error {
		if _, held := client.LockHolder(stateDir); !held {
			return fmt.Errorf("pid %d released the state dir's lock", pid)
		}
		return nil
	}
}

// followInterval is how long osd init waits before it asks the daemon again, elapsed
// after its start: briefly at first, when a run with nothing to change ends within about
// two seconds (each wait adds up to its length to that), then at a pace that a
// terminal's progress needs.
func followInterval(elapsed time.Duration) time.Duration {
	if elapsed < 5*time.Second {
		return 50 * time.Millisecond
	}
	return 300 * time.Millisecond
}

// ensureDaemon starts the daemon unless it answers, and waits for its API. A daemon that
// ends before its API answers is an error naming its log: the process this call started
// (however long it takes to load: seconds on a busy host), the systemd unit, or a daemon
// that another command started (it released its lock). When the one started here ends
// because another took the lock meanwhile, that other one is followed.
func ensureDaemon(ctx context.Context, g *globals, c *client.Client) error {
	if _, err := c.ServerInfo(ctx); err == nil {
		return nil
	} else if !errors.Is(err, client.ErrDaemonNotRunning) {
		return err
	}
	var ended func() error
	if pid, held := client.LockHolder(g.stateDir); held {
		ended = lockReleased(g.stateDir, pid)
	} else {
		var err error
		if ended, err = startDaemon(g); err != nil {
			return err
		}
	}
	for {
		if _, err := c.ServerInfo(ctx); err == nil {
			return nil
		}
		if why := ended(); why != nil {
			if _, err := c.ServerInfo(ctx); err == nil {
				return nil
			}
			if pid, held := client.LockHolder(g.stateDir); held {
				// Another daemon took the lock first (one started meanwhile by another
				// command): the one started here refused to run beside it; follow that one.
				ended = lockReleased(g.stateDir, pid)
				continue
			}
			return fmt.Errorf("the osd daemon exited at start (%v); see %s", why, filepath.Join(g.stateDir, "logs", "daemon.log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the osd daemon did not answer in time: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// progress prints one line per step with its duration; on a terminal it animates the
// wait and shows the current reason, otherwise it prints plain lines.
type progress struct {
	profile bool // print the run's profile at the end
	w       io.Writer
	tty     bool
	start   time.Time
	name    string
	since   time.Time
	frame   int
	seen    map[string]string // non-terminal: the last printed item per key (see changedItems)
}

func newProgress(w *os.File) *progress {
	_, err := unix.IoctlGetTermios(int(w.Fd()), unix.TCGETS)
	return &progress{w: w, tty: err == nil, start: time.Now()}
}

func (p *progress) step(name string) {
	p.name, p.since, p.seen = name, time.Now(), map[string]string{}
	if !p.tty {
		fmt.Fprintf(p.w, "%s ...\n", name)
	}
}

func (p *progress) waiting(why string) {
	if p.tty {
		p.frame++
		fmt.Fprintf(p.w, "\r\033[K%c %s (%s) %s", `|/-\`[p.frame%4], p.name, time.Since(p.since).Round(time.Second), strings.ReplaceAll(why, "\n", ", "))
		return
	}
	if p.seen == nil {
		p.seen = map[string]string{}
	}
	for _, item := range changedItems(p.seen, why) {
		fmt.Fprintf(p.w, "  waiting: %s\n", item)
	}
}

// changedItems returns the items of why (one a line) that differ from the last one seen
// with the same key, its first word (a release's name, for the deployment step), and
// records them in seen (pure but for seen). A log then gets a line when one release's or
// one image's state changes, not the whole set again.
func changedItems(seen map[string]string, why string) []string {
	var out []string
	for _, item := range strings.Split(why, "\n") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, _, _ := strings.Cut(item, " ")
		if seen[key] == item {
			continue
		}
		seen[key] = item
		out = append(out, item)
	}
	return out
}

func (p *progress) ok(msg string) {
	p.line("ok", msg, time.Since(p.since))
}

func (p *progress) okTook(msg string, took time.Duration) {
	p.line("ok", msg, took)
}

func (p *progress) fail(err error) {
	p.line("FAILED", err.Error(), time.Since(p.since))
}

func (p *progress) line(mark, msg string, took time.Duration) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "%-7s %s: %s (%s)\n", mark, p.name, msg, took.Round(100*time.Millisecond))
}

func (p *progress) done() {
	fmt.Fprintf(p.w, "done in %s\n", time.Since(p.start).Round(100*time.Millisecond))
}
