package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Merge deep-merges layers left to right into a new map: maps merge key by key, lists and
// scalars from a later layer replace earlier ones, and an explicit nil deletes the key.
// The inputs are never modified and the result shares no maps or slices with them.
func Merge(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		mergeInto(out, l)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, ok := asMap(v)
		if !ok {
			dst[k] = copyValue(v)
			continue
		}
		dm, ok := dst[k].(map[string]any)
		if !ok {
			dm = map[string]any{}
			dst[k] = dm
		}
		mergeInto(dm, sm)
	}
}

// asMap accepts the map shapes that YAML/JSON decoders produce.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return Merge(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}
		return out
	case []string:
		return append([]string(nil), t...)
	}
	return v
}

// ValuesHash is the hex sha256 of the canonical JSON of values (encoding/json sorts map
// keys). Two value trees that marshal to the same JSON have the same hash, whatever the
// Go numeric types they carry.
func ValuesHash(values map[string]any) (string, error) {
	if values == nil {
		values = map[string]any{}
	}
	b, err := json.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("hash values: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
