package cluster

import (
	"fmt"

	"github.com/osdcloud/osd/daemon/rest"
)

// codedErr is an error with its own message that wraps a rest sentinel, so errors.Is
// matches both the cluster sentinel and the HTTP status it is answered with.
type codedErr struct {
	msg  string
	base error
}

func (e *codedErr) Error() string { return e.msg }
func (e *codedErr) Unwrap() error { return e.base }

func sentinel(msg string, status error) error { return &codedErr{msg: msg, base: status} }

// Sentinel errors of token checks and joins. Each wraps the rest sentinel that gives its
// HTTP status, so rest.StatusFor maps them without a table here.
var (
	ErrTokenInvalid   = sentinel("join token is not valid", rest.ErrUnauthorized)
	ErrTokenUnknown   = sentinel("no such join token", rest.ErrNotFound)
	ErrTokenWrongName = sentinel("join token was issued for another name", rest.ErrForbidden)
	ErrTokenExpired   = sentinel("join token expired", rest.ErrForbidden)
	ErrTokenRevoked   = sentinel("join token was revoked", rest.ErrForbidden)
	ErrTokenConsumed  = sentinel("join token was already used", rest.ErrForbidden)
	ErrTokenExists    = sentinel("a join token already exists", rest.ErrConflict)
	ErrAlreadyMember  = sentinel("already a member", rest.ErrConflict)
	ErrInvalid        = sentinel("invalid request", rest.ErrBadRequest)
	ErrNotMember      = sentinel("no such member", rest.ErrNotFound)
	ErrAlreadyTrusted = sentinel("certificate already trusted", rest.ErrConflict)
)

// errorf returns an error reading as the formatted message that matches sentinel (and so
// its HTTP status) with errors.Is. A %w in format is wrapped too.
func errorf(sentinel error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &wrapped{err: err, sentinel: sentinel}
}

type wrapped struct {
	err      error
	sentinel error
}

func (e *wrapped) Error() string   { return e.err.Error() }
func (e *wrapped) Unwrap() []error { return []error{e.sentinel, e.err} }
