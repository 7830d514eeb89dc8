package rest

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeJSONThroughRouter(t *testing.T) {
	h := NewRouter(testEndpoints())
	tests := []struct {
		name        string
		contentType string
		body        string
		wantCode    int
		wantErr     string
	}{
		{"valid", "application/json", `{"name":"a","count":1}`, 201, ""},
		{"valid with charset", "application/json; charset=utf-8", `{"name":"a"}`, 201, ""},
		{"no content type", "", `{"name":"a"}`, 201, ""},
		{"+json type", "application/merge-patch+json", `{"name":"a"}`, 201, ""},
		{"trailing whitespace", "application/json", "{\"name\":\"a\"}\n\n ", 201, ""},
		{"malformed", "application/json", "{\n\"name\": \"a\",,}", 400, "malformed JSON at line 2, column 13: invalid character ','"},
		{"truncated", "application/json", `{"name":"a"`, 400, "unexpected end of input"},
		{"unknown field", "application/json", `{"name":"a","colour":"red"}`, 400, `unknown field "colour"`},
		{"wrong type", "application/json", `{"name":"a","count":"three"}`, 400, "field count: got JSON string, want integer"},
		{"nested wrong type", "application/json", `[1]`, 400, "request body is a JSON array, want object"},
		{"trailing garbage", "application/json", `{"name":"a"} {"name":"b"}`, 400, "unexpected data after the JSON value"},
		{"trailing junk", "application/json", `{"name":"a"}xyz`, 400, "unexpected data after the JSON value"},
		{"empty body", "application/json", ``, 400, "request body is empty"},
		{"oversized", "application/json", `{"name":"` + strings.Repeat("x", 100) + `"}`, 413, "larger than 64 bytes"},
		{"wrong content type", "text/plain", `{"name":"a"}`, 415, `"text/plain" is not JSON`},
		{"form content type", "application/x-www-form-urlencoded", `name=a`, 415, "not JSON"},
		{"malformed content type", "application/json; =", `{}`, 415, "malformed Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, env := do(t, h, "POST", "/1.0/things/x", tt.contentType, tt.body)
			if rec.Code != tt.wantCode || env.StatusCode != tt.wantCode {
				t.Fatalf("POST %q = %d %+v, want %d", tt.body, rec.Code, env, tt.wantCode)
			}
			if tt.wantErr != "" && (env.Type != "error" || !strings.Contains(env.Error, tt.wantErr)) {
				t.Errorf("POST %q error = %q, want it to contain %q", tt.body, env.Error, tt.wantErr)
			}
		})
	}
}

func TestDecodeJSONNoBody(t *testing.T) {
	req := httptest.NewRequest("POST", "/1.0/x", nil)
	req.Body = nil
	var v thing
	if err := DecodeJSON(req, &v, 0); !errors.Is(err, ErrBadRequest) {
		t.Errorf("DecodeJSON(nil body) = %v, want ErrBadRequest", err)
	}
}

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\nef")
	tests := []struct {
		off             int64
		wantLine, wantC int
	}{{0, 1, 1}, {1, 1, 2}, {3, 2, 1}, {4, 2, 2}, {8, 3, 3}, {99, 3, 3}, {-1, 1, 1}}
	for _, tt := range tests {
		line, col := position(data, tt.off)
		if line != tt.wantLine || col != tt.wantC {
			t.Errorf("position(%d) = %d:%d, want %d:%d", tt.off, line, col, tt.wantLine, tt.wantC)
		}
	}
}
