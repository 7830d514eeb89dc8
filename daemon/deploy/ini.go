package deploy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// RenderINI renders OpenStack configuration from section -> key -> value. Output is
// deterministic: DEFAULT first, then the other sections sorted, keys sorted. Lists are
// comma-joined, booleans are true/false, nil values are omitted. Newlines in names or
// values are refused (they would inject lines), as are names that would start another
// line, section, key or comment: oslo.config splits a line at the first '=' or ':' and
// continues a value on a line that starts with a space.
func RenderINI(sections map[string]map[string]any) (string, error) {
	names := make([]string, 0, len(sections))
	for name := range sections {
		if name != "DEFAULT" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if _, ok := sections["DEFAULT"]; ok {
		names = append([]string{"DEFAULT"}, names...)
	}
	var b strings.Builder
	for i, name := range names {
		if name == "" || strings.ContainsAny(name, "[]\r\n") || strings.TrimSpace(name) != name {
			return "", fmt.Errorf("ini section name %q is invalid (empty, brackets, newlines or outer spaces)", name)
		}
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n", name)
		keys := make([]string, 0, len(sections[name]))
		for k := range sections[name] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "" || strings.ContainsAny(k, "=:[\r\n") || strings.TrimSpace(k) != k || strings.HasPrefix(k, "#") || strings.HasPrefix(k, ";") {
				return "", fmt.Errorf("ini key %q in [%s] is invalid (empty, '=', ':', '[', newlines, outer spaces or a comment mark)", k, name)
			}
			v := sections[name][k]
			if v == nil {
				continue
			}
			s, err := iniValue(v)
			if err != nil {
				return "", fmt.Errorf("ini [%s] %s: %w", name, k, err)
			}
			fmt.Fprintf(&b, "%s = %s\n", k, s)
		}
	}
	return b.String(), nil
}

func iniValue(v any) (string, error) {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case bool:
		s = strconv.FormatBool(t)
	case int:
		s = strconv.Itoa(t)
	case int32:
		s = strconv.FormatInt(int64(t), 10)
	case int64:
		s = strconv.FormatInt(t, 10)
	case float64:
		s = strconv.FormatFloat(t, 'f', -1, 64)
	case []string:
		parts := make([]string, len(t))
		for i, e := range t {
			p, err := iniValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = p
		}
		s = strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			if _, nested := e.([]any); nested {
				return "", fmt.Errorf("nested list is not representable")
			}
			p, err := iniValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = p
		}
		s = strings.Join(parts, ",")
	default:
		return "", fmt.Errorf("value of type %T is not representable", v)
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("value contains a newline")
	}
	return s, nil
}
