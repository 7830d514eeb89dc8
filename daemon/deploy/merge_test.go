package deploy

import (
	"reflect"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		name   string
		layers []map[string]any
		want   map[string]any
	}{
		{name: "empty", layers: nil, want: map[string]any{}},
		{name: "maps merge deep",
			layers: []map[string]any{{"a": map[string]any{"b": 1, "c": map[string]any{"d": 1}}}, {"a": map[string]any{"c": map[string]any{"e": 2}}}},
			want:   map[string]any{"a": map[string]any{"b": 1, "c": map[string]any{"d": 1, "e": 2}}}},
		{name: "lists replace", layers: []map[string]any{{"l": []any{1, 2, 3}}, {"l": []any{4}}}, want: map[string]any{"l": []any{4}}},
		{name: "scalar replaces map", layers: []map[string]any{{"a": map[string]any{"b": 1}}, {"a": "x"}}, want: map[string]any{"a": "x"}},
		{name: "map replaces scalar", layers: []map[string]any{{"a": "x"}, {"a": map[string]any{"b": 1}}}, want: map[string]any{"a": map[string]any{"b": 1}}},
		{name: "null deletes", layers: []map[string]any{{"a": map[string]any{"b": 1, "c": 2}, "d": 1}, {"a": map[string]any{"b": nil}, "d": nil}},
			want: map[string]any{"a": map[string]any{"c": 2}}},
		{name: "null inside new map is dropped", layers: []map[string]any{{}, {"a": map[string]any{"b": nil, "c": 1}}},
			want: map[string]any{"a": map[string]any{"c": 1}}},
		{name: "map[string]string layer", layers: []map[string]any{{"a": map[string]any{"x": "1"}}, {"a": map[string]string{"y": "2"}}},
			want: map[string]any{"a": map[string]any{"x": "1", "y": "2"}}},
		{name: "later wins", layers: []map[string]any{{"a": 1}, {"a": 2}, {"a": 3}}, want: map[string]any{"a": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Merge(tt.layers...); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Merge(%v) = %v, want %v", tt.layers, got, tt.want)
			}
		})
	}
}

func TestMergeDoesNotAlias(t *testing.T) {
	base := map[string]any{"a": map[string]any{"b": 1}, "l": []any{map[string]any{"x": 1}}}
	over := map[string]any{"a": map[string]any{"c": 2}}
	out := Merge(base, over)
	out["a"].(map[string]any)["b"] = 99
	out["l"].([]any)[0].(map[string]any)["x"] = 99
	if base["a"].(map[string]any)["b"] != 1 || base["l"].([]any)[0].(map[string]any)["x"] != 1 {
		t.Fatalf("Merge() result aliases its input: base = %v", base)
	}
	if _, ok := base["a"].(map[string]any)["c"]; ok {
		t.Fatalf("Merge() modified its input: base = %v", base)
	}
}

func TestValuesHash(t *testing.T) {
	a, _ := ValuesHash(map[string]any{"x": 1, "y": map[string]any{"b": true, "a": "s"}})
	b, _ := ValuesHash(map[string]any{"y": map[string]any{"a": "s", "b": true}, "x": float64(1)})
	c, _ := ValuesHash(map[string]any{"x": 2, "y": map[string]any{"b": true, "a": "s"}})
	if a != b {
		t.Errorf("ValuesHash(same values, other order/types) = %s, want %s", b, a)
	}
	if a == c {
		t.Errorf("ValuesHash(changed values) = %s, want different from %s", c, a)
	}
	if len(a) != 64 {
		t.Errorf("len(ValuesHash()) = %d, want 64", len(a))
	}
	e1, _ := ValuesHash(nil)
	e2, _ := ValuesHash(map[string]any{})
	if e1 != e2 {
		t.Errorf("ValuesHash(nil) = %s, want %s", e1, e2)
	}
	if _, err := ValuesHash(map[string]any{"f": func() {}}); err == nil {
		t.Errorf("ValuesHash(func) error = nil, want error")
	}
}

func TestRenderINI(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]map[string]any
		want    string
		wantErr string
	}{
		{name: "order and types", in: map[string]map[string]any{
			"token":       {"provider": "fernet", "expiration": 3600},
			"DEFAULT":     {"debug": false, "transport_url": "rabbit://a", "ratio": 1.5},
			"cache":       {"enabled": true, "memcache_servers": []any{"m1:11211", "m2:11211"}, "skip": nil},
			"oslo_policy": {"list": []string{"a", "b"}},
		}, want: "[DEFAULT]\ndebug = false\nratio = 1.5\ntransport_url = rabbit://a\n\n" +
			"[cache]\nenabled = true\nmemcache_servers = m1:11211,m2:11211\n\n" +
			"[oslo_policy]\nlist = a,b\n\n[token]\nexpiration = 3600\nprovider = fernet\n"},
		{name: "no DEFAULT", in: map[string]map[string]any{"b": {"k": "v"}, "a": {}}, want: "[a]\n\n[b]\nk = v\n"},
		{name: "empty", in: nil, want: ""},
		{name: "newline in value", in: map[string]map[string]any{"DEFAULT": {"k": "a\n[evil]"}}, wantErr: "newline"},
		{name: "newline in list", in: map[string]map[string]any{"DEFAULT": {"k": []any{"a", "b\nc"}}}, wantErr: "newline"},
		{name: "bad key", in: map[string]map[string]any{"DEFAULT": {"k=v": "x"}}, wantErr: "invalid"},
		{name: "bad section", in: map[string]map[string]any{"a]b": {"k": "x"}}, wantErr: "invalid"},
		{name: "map value", in: map[string]map[string]any{"DEFAULT": {"k": map[string]any{}}}, wantErr: "not representable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderINI(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RenderINI() error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("RenderINI() = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
	// Deterministic across runs (map iteration order is random).
	in := map[string]map[string]any{"DEFAULT": {"a": 1, "b": 2, "c": 3}, "x": {"d": 4}, "y": {"e": 5}}
	first, _ := RenderINI(in)
	for i := 0; i < 20; i++ {
		if got, _ := RenderINI(in); got != first {
			t.Fatalf("RenderINI() = %q, want %q (stable)", got, first)
		}
	}
}
