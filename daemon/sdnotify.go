package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/osdcloud/osd/daemon/client"
)

// The service manager's notification protocol (sd_notify(3)): datagrams of KEY=VALUE lines
// sent to the unix socket named by NOTIFY_SOCKET. osd's unit is Type=notify: systemd counts
// the daemon started when it says READY=1, and with WatchdogSec= it restarts a daemon that
// stops sending WATCHDOG=1.

// notifyServiceManager tells the service manager, when there is one, that the daemon is
// ready once its API answers, pings the watchdog while the API keeps answering, and says
// STOPPING=1 when ctx ends. It takes NOTIFY_SOCKET and WATCHDOG_* out of the environment
// first: the embedded k3s would otherwise send its own READY=1 and unset the variable, and
// no child should speak for the daemon.
func (d *Daemon) notifyServiceManager(ctx context.Context) {
	n, wd, err := notifierFromEnv(os.Getpid())
	if err != nil {
		slog.Warn("service manager notification disabled", "err", err)
		return
	}
	if n.addr == "" {
		return
	}
	probe := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := client.NewUnix(d.cfg.Socket).ServerInfo(ctx)
		return err
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		n.run(ctx, wd, probe)
	}()
}

// notifier sends notifications to one socket address ("" when not run by a service manager).
type notifier struct{ addr string }

// notifierFromEnv reads and unsets NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID.
func notifierFromEnv(pid int) (notifier, time.Duration, error) {
	sock, usec, wpid := os.Getenv("NOTIFY_SOCKET"), os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		os.Unsetenv(k)
	}
	addr, err := notifyAddr(sock)
	if err != nil {
		return notifier{}, 0, err
	}
	wd, err := watchdogPeriod(usec, wpid, pid)
	return notifier{addr: addr}, wd, err
}

// notifyAddr turns NOTIFY_SOCKET into a socket address: an absolute path, or an abstract
// socket written with a leading @.
func notifyAddr(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case strings.HasPrefix(v, "/"):
		return v, nil
	case strings.HasPrefix(v, "@") && len(v) > 1:
		return "\x00" + v[1:], nil
	}
	return "", fmt.Errorf("NOTIFY_SOCKET %q is neither an absolute path nor an abstract socket (@name)", v)
}

// watchdogPeriod is how often to ping the watchdog: a quarter of WATCHDOG_USEC, so that one
// slow answer of the API does not let the deadline pass. Zero means no watchdog: unset, or
// meant for another process (WATCHDOG_PID).
func watchdogPeriod(usec, wpid string, pid int) (time.Duration, error) {
	if usec == "" {
		return 0, nil
	}
	if wpid != "" && wpid != strconv.Itoa(pid) {
		return 0, nil
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC %q is not a positive number of microseconds", usec)
	}
	return time.Duration(n) * time.Microsecond / 4, nil
}

// run sends READY=1 once probe succeeds, then WATCHDOG=1 every period while it does, and
// STOPPING=1 when ctx ends.
func (n notifier) run(ctx context.Context, period time.Duration, probe func(context.Context) error) {
	for {
		err := probe(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := n.send("READY=1\nSTATUS=API ready"); err != nil {
		slog.Warn("notify the service manager", "err", err)
	}
	var tick <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			n.send("STOPPING=1")
			return
		case <-tick:
			if err := probe(ctx); err != nil {
				if ctx.Err() == nil {
					slog.Warn("API did not answer: watchdog not pinged", "err", err)
				}
				continue
			}
			if err := n.send("WATCHDOG=1"); err != nil {
				slog.Warn("ping the service manager's watchdog", "err", err)
			}
		}
	}
}

func (n notifier) send(state string) error {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
