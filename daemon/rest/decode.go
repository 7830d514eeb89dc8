package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
)

// DefaultMaxBody is the request body limit DecodeJSON applies when given maxBytes <= 0.
const DefaultMaxBody = 1 << 20

// DecodeJSON decodes the request body into v strictly: the Content-Type must be JSON (or
// absent), the body at most maxBytes (else ErrTooLarge), exactly one JSON value with no
// unknown fields and nothing after it (else ErrBadRequest naming the problem).
func DecodeJSON(r *http.Request, v any, maxBytes int64) error {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBody
	}
	if r.Body == nil {
		return Errorf(ErrBadRequest, "request body is empty, want a JSON value")
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return Errorf(ErrTooLarge, "request body is larger than %d bytes", maxBytes)
		}
		return Errorf(ErrBadRequest, "read request body: %v", err)
	}
	return decodeStrict(data, v)
}

// checkContentType accepts an empty type, application/json and application/*+json.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return Errorf(ErrUnsupportedMediaType, "malformed Content-Type %q, want application/json", ct)
	}
	if mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return Errorf(ErrUnsupportedMediaType, "Content-Type %q is not JSON, want application/json", mt)
}

func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return Errorf(ErrBadRequest, "request body is empty, want a JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(data, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		line, col := position(data, off)
		if err == nil {
			return Errorf(ErrBadRequest, "unexpected data after the JSON value at line %d, column %d (%v)", line, col, tok)
		}
		return Errorf(ErrBadRequest, "unexpected data after the JSON value at line %d, column %d", line, col)
	}
	return nil
}

func decodeError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var invalid *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &syntax):
		// Offset is just past the offending byte; point at the byte itself.
		line, col := position(data, syntax.Offset-1)
		return Errorf(ErrBadRequest, "malformed JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(ErrBadRequest, "malformed JSON: unexpected end of input")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return Errorf(ErrBadRequest, "request body is a JSON %s, want %s", typ.Value, jsonKind(typ.Type))
		}
		return Errorf(ErrBadRequest, "field %s: got JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
	case errors.As(err, &invalid):
		return fmt.Errorf("decode request: %w", err) // a programming error: 500
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Errorf(ErrBadRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return Errorf(ErrBadRequest, "invalid request: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonKind names the JSON a Go type accepts, for messages meant for API users.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "non-negative integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "number"
	default:
		return t.String()
	}
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
