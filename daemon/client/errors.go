package client

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"

	"github.com/osdcloud/osd/daemon/rest"
)

// ErrDaemonNotRunning is matched (errors.Is) by connection failures that mean no daemon
// listens on the socket: it is missing or stale.
var ErrDaemonNotRunning = errors.New("osd daemon is not running")

// Error is an error envelope returned by the daemon.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("osd daemon answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// Is makes errors.Is(err, rest.ErrNotFound) and the like true for the matching status.
func (e *Error) Is(target error) bool {
	s := rest.SentinelFor(e.StatusCode)
	return s != nil && s == target
}

// connError is a connection failure explained for the user; it still matches its cause.
type connError struct {
	msg  string
	errs []error
}

func (e *connError) Error() string   { return e.msg }
func (e *connError) Unwrap() []error { return e.errs }

// explainDial turns a failure to reach the unix socket into an actionable error.
func explainDial(socket string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return &connError{
			msg:  fmt.Sprintf("%s (no socket at %s): start it with `osd daemon` or `systemctl start osd`", ErrDaemonNotRunning, socket),
			errs: []error{ErrDaemonNotRunning, err},
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &connError{
			msg:  fmt.Sprintf("%s (stale socket at %s, nothing listens): start it with `osd daemon` or `systemctl start osd`", ErrDaemonNotRunning, socket),
			errs: []error{ErrDaemonNotRunning, err},
		}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return &connError{
			msg:  fmt.Sprintf("permission denied on the osd socket %s: run as root (for example with sudo)", socket),
			errs: []error{os.ErrPermission, err},
		}
	}
	return nil
}
