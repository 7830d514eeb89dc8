package rest

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"
)

type fuzzRequest struct {
	Name    string            `json:"name"`
	Count   int               `json:"count"`
	Ratio   float64           `json:"ratio"`
	Enabled *bool             `json:"enabled"`
	Tags    []string          `json:"tags"`
	Labels  map[string]string `json:"labels"`
	Nested  *struct {
		Depth uint8 `json:"depth"`
		Any   any   `json:"any"`
	} `json:"nested"`
}

// FuzzDecodeRequest checks that DecodeJSON never panics and only ever fails with one of
// the sentinel errors (so a bad request can never become a 500).
func FuzzDecodeRequest(f *testing.F) {
	seeds := []struct {
		ct   string
		body string
	}{
		{"application/json", `{"name":"a","count":1,"tags":["x"],"labels":{"k":"v"},"nested":{"depth":3,"any":[1,{"a":null}]}}`},
		{"", `{}`},
		{"application/json", `{"count":1e400}`},
		{"application/json", `{"nested":{"depth":300}}`},
		{"application/json", `{"name":"\ud800"}`},
		{"application/json", `[1,2,3]`},
		{"application/json", `{"name":"a"} trailing`},
		{"application/json", `{"unknown":1}`},
		{"text/html", `{}`},
		{"application/json; charset=", `{}`},
		{"application/json", "\xff\xfe"},
		{"application/json", ``},
		{"application/json", `null`},
	}
	for _, s := range seeds {
		f.Add(s.ct, []byte(s.body))
	}
	sentinels := Sentinels()
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req := httptest.NewRequest("POST", "/1.0/x", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		var v fuzzRequest
		err := DecodeJSON(req, &v, 4096)
		if err == nil {
			return
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				if StatusFor(err) >= 500 && !errors.Is(err, ErrNotReady) {
					t.Fatalf("DecodeJSON(%q, %q) = %v mapped to %d, want a 4xx", contentType, body, err, StatusFor(err))
				}
				return
			}
		}
		t.Fatalf("DecodeJSON(%q, %q) = %v (%T), want nil or a sentinel error", contentType, body, err, err)
	})
}
