package rest

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors. Callers wrap them with %w (or use Errorf) and StatusFor turns them into
// HTTP status codes; anything else is a 500.
var (
	ErrBadRequest           = errors.New("bad request")
	ErrUnauthorized         = errors.New("unauthorized")
	ErrForbidden            = errors.New("forbidden")
	ErrNotFound             = errors.New("not found")
	ErrMethodNotAllowed     = errors.New("method not allowed")
	ErrConflict             = errors.New("conflict")
	ErrPreconditionFailed   = errors.New("precondition failed")
	ErrTooLarge             = errors.New("request too large")
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	ErrNotReady             = errors.New("not ready")
	ErrGone                 = errors.New("gone")
	ErrTooManyRequests      = errors.New("too many requests")
)

// statuses is the one table from sentinel to HTTP status, checked in order.
var statuses = []struct {
	err  error
	code int
}{
	{ErrBadRequest, http.StatusBadRequest},
	{ErrUnauthorized, http.StatusUnauthorized},
	{ErrForbidden, http.StatusForbidden},
	{ErrNotFound, http.StatusNotFound},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed},
	{ErrConflict, http.StatusConflict},
	{ErrPreconditionFailed, http.StatusPreconditionFailed},
	{ErrTooLarge, http.StatusRequestEntityTooLarge},
	{ErrUnsupportedMediaType, http.StatusUnsupportedMediaType},
	{ErrNotReady, http.StatusServiceUnavailable},
	{ErrGone, http.StatusGone},
	{ErrTooManyRequests, http.StatusTooManyRequests},
}

// StatusFor maps an error to the HTTP status code it is answered with: 200 for nil, the
// code of the first sentinel it wraps, otherwise 500.
func StatusFor(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var coded *codedError
	if errors.As(err, &coded) {
		if code := sentinelStatus(coded.sentinel); code != 0 {
			return code
		}
	}
	if code := sentinelStatus(err); code != 0 {
		return code
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

func sentinelStatus(err error) int {
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return 0
}

// Sentinels returns every sentinel error StatusFor knows, for callers that map them back.
func Sentinels() []error {
	out := make([]error, len(statuses))
	for i, s := range statuses {
		out[i] = s.err
	}
	return out
}

// SentinelFor returns the sentinel answered with HTTP status code, or nil if none is.
func SentinelFor(code int) error {
	for _, s := range statuses {
		if s.code == code {
			return s.err
		}
	}
	return nil
}

// Errorf returns an error whose text is the formatted message and that wraps sentinel,
// e.g. Errorf(ErrNotFound, "image %q", name). A %w verb in format is wrapped too.
func Errorf(sentinel error, format string, args ...any) error {
	return &codedError{sentinel: sentinel, err: fmt.Errorf(format, args...)}
}

type codedError struct {
	sentinel error
	err      error
}

func (e *codedError) Error() string   { return e.err.Error() }
func (e *codedError) Unwrap() []error { return []error{e.sentinel, e.err} }
