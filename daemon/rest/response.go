package rest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/osdcloud/osd/daemon/api"
)

// Response is what a handler returns; the router renders it.
type Response interface {
	Render(w http.ResponseWriter, r *http.Request) error
}

type envelopeResponse struct {
	env      api.Response
	metadata any
	headers  map[string]string
}

// SyncResponse answers 200 with metadata in a sync envelope.
func SyncResponse(metadata any) Response {
	return SyncResponseStatus(http.StatusOK, metadata)
}

// SyncResponseStatus answers code (e.g. 201) with metadata in a sync envelope.
func SyncResponseStatus(code int, metadata any) Response {
	return &envelopeResponse{
		env:      api.Response{Type: api.SyncResponse, Status: statusText(code), StatusCode: code},
		metadata: metadata,
	}
}

// SyncResponseLocation answers 201 Created with metadata and a Location header.
func SyncResponseLocation(location string, metadata any) Response {
	resp := SyncResponseStatus(http.StatusCreated, metadata).(*envelopeResponse)
	resp.headers = map[string]string{"Location": location}
	return resp
}

// EmptySyncResponse answers 200 with an empty sync envelope.
var EmptySyncResponse Response = SyncResponse(nil)

// AsyncResponse answers 202 with the URL of a background operation and its description.
func AsyncResponse(operation string, metadata any) Response {
	return &envelopeResponse{
		env: api.Response{Type: api.AsyncResponse, Status: statusText(http.StatusAccepted),
			StatusCode: http.StatusAccepted, Operation: operation},
		metadata: metadata,
		headers:  map[string]string{"Location": operation},
	}
}

// ErrorResponse answers err in an error envelope with the code StatusFor gives it.
func ErrorResponse(err error) Response {
	code := StatusFor(err)
	msg := statusText(code)
	if err != nil {
		msg = err.Error()
	}
	return &envelopeResponse{
		env: api.Response{Type: api.ErrorResponse, Status: statusText(code), StatusCode: code,
			ErrorCode: code, Error: msg},
	}
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return fmt.Sprintf("status %d", code)
}

// Render writes the envelope. Metadata is encoded before anything is written, so an
// encoding failure leaves the writer untouched for the router to answer 500.
func (e *envelopeResponse) Render(w http.ResponseWriter, _ *http.Request) error {
	env := e.env
	if e.metadata != nil {
		b, err := json.Marshal(e.metadata)
		if err != nil {
			return fmt.Errorf("encode response metadata: %w", err)
		}
		env.Metadata = b
	}
	body, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	for k, v := range e.headers {
		w.Header().Set(k, v)
	}
	writeJSON(w, env.StatusCode, append(body, '\n'))
	return nil
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

type manualResponse func(w http.ResponseWriter) error

// ManualResponse hands the writer to fn, for streams and other non-envelope answers.
func ManualResponse(fn func(w http.ResponseWriter) error) Response {
	return manualResponse(fn)
}

func (m manualResponse) Render(w http.ResponseWriter, _ *http.Request) error { return m(w) }
