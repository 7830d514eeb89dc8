package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon"
	"github.com/osdcloud/osd/daemon/k3s"
)

func newDaemonCmd(g *globals) *cobra.Command {
	var cfg daemon.Config
	var debug bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the osd daemon (API, state, embedded Kubernetes) in the foreground",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errNeedRoot("osd daemon")
			}
			cfg.StateDir, cfg.RunDir, cfg.Socket = g.stateDir, g.runDir, g.socket
			tuneGC()
			logOut, err := daemon.RedirectLibraryOutput(g.stateDir)
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
			slog.SetDefault(logger)
			d, err := daemon.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			go daemon.KeepDefaultLogger(ctx, logger, time.Second)
			if err := d.Run(ctx); err != nil {
				slog.Error("osd daemon failed", "err", err)
				return exitError{1}
			}
			slog.Info("osd daemon stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.CacheDir, "cache-dir", daemon.DefaultCacheDir, "where built images and downloaded packages are kept (osd reset leaves it)")
	f.StringVar(&cfg.NodeName, "node-name", "", "Kubernetes node name (default: the host name)")
	f.StringVar(&cfg.NodeIP, "node-ip", "", "address the node advertises (default: the address of the default route)")
	f.BoolVar(&cfg.KeepWorkloads, "keep-workloads", false, "leave pod containers running when the daemon stops (for upgrades)")
	f.StringVar(&cfg.HTTPSAddress, "https-address", daemon.DefaultHTTPSAddress, "the remote API's address (mutual TLS; none to disable)")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", "", "the kubelet's cgroup root, for more than one node on a host (default: env OSD_CGROUP_ROOT, else the root)")
	f.BoolVar(&debug, "debug", false, "log at debug level")
	f.DurationVar(&cfg.AgentTokenTTL, "agent-token-ttl", daemon.DefaultAgentTokenTTL, "how long a joining node's k3s agent credential lives (dropped when its join completes)")
	f.DurationVar(&cfg.MemberCertLifetime, "member-cert-lifetime", daemon.DefaultMemberCertLifetime, "how long the member certificates this daemon issues last (members renew at half of it)")
	// Shortened only by tests of expiry and renewal.
	_ = f.MarkHidden("agent-token-ttl")
	_ = f.MarkHidden("member-cert-lifetime")
	return cmd
}

// tuneGC sets the daemon's garbage collector for an idle daemon (a converge raises it
// while it runs).
func tuneGC() { k3s.TuneGC(false) }
