package api

import "encoding/json"

// ResponseType says which kind of envelope a Response is.
type ResponseType string

// The envelope kinds.
const (
	// SyncResponse carries the result in Metadata.
	SyncResponse ResponseType = "sync"
	// AsyncResponse names a background operation in Operation; Metadata describes it.
	AsyncResponse ResponseType = "async"
	// ErrorResponse carries ErrorCode and Error.
	ErrorResponse ResponseType = "error"
)

// Response is the JSON envelope of every REST answer.
type Response struct {
	Type       ResponseType    `json:"type"`
	Status     string          `json:"status"`
	StatusCode int             `json:"status_code"`
	Operation  string          `json:"operation,omitempty"`
	ErrorCode  int             `json:"error_code,omitempty"`
	Error      string          `json:"error,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// MetadataAs decodes the envelope's metadata into v. Empty metadata leaves v untouched.
func (r *Response) MetadataAs(v any) error {
	if len(r.Metadata) == 0 || string(r.Metadata) == "null" || v == nil {
		return nil
	}
	return json.Unmarshal(r.Metadata, v)
}
