package rest

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestStatusFor(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 200},
		{"bad request", ErrBadRequest, 400},
		{"unauthorized", ErrUnauthorized, 401},
		{"forbidden", ErrForbidden, 403},
		{"not found", ErrNotFound, 404},
		{"method not allowed", ErrMethodNotAllowed, 405},
		{"conflict", ErrConflict, 409},
		{"precondition failed", ErrPreconditionFailed, 412},
		{"too large", ErrTooLarge, 413},
		{"unsupported media type", ErrUnsupportedMediaType, 415},
		{"not ready", ErrNotReady, 503},
		{"wrapped with %w", fmt.Errorf("image %q: %w", "x", ErrNotFound), 404},
		{"wrapped twice", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", ErrConflict)), 409},
		{"Errorf", Errorf(ErrPreconditionFailed, "etag %s", "abc"), 412},
		{"Errorf wrapping another sentinel keeps its own", Errorf(ErrConflict, "during: %w", ErrNotFound), 409},
		{"plain error", errors.New("disk on fire"), 500},
		{"max bytes error", &http.MaxBytesError{Limit: 10}, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusFor(tt.err); got != tt.want {
				t.Errorf("StatusFor(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorf(t *testing.T) {
	inner := errors.New("inner cause")
	err := Errorf(ErrNotFound, "image %q: %w", "cirros", inner)
	if got, want := err.Error(), `image "cirros": inner cause`; got != want {
		t.Errorf("Errorf().Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, inner) {
		t.Errorf("Errorf() Is(ErrNotFound), Is(inner) = %v, %v, want true, true", errors.Is(err, ErrNotFound), errors.Is(err, inner))
	}
}

func TestSentinelFor(t *testing.T) {
	for _, s := range Sentinels() {
		code := StatusFor(s)
		if got := SentinelFor(code); got != s {
			t.Errorf("SentinelFor(%d) = %v, want %v", code, got, s)
		}
	}
	if got := SentinelFor(500); got != nil {
		t.Errorf("SentinelFor(500) = %v, want nil", got)
	}
}
