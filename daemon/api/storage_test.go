package api

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"20G": 20 << 30, "20GiB": 20 << 30, "20gb": 20 << 30, "1.5G": 3 << 29, "512M": 1 << 29, "1T": 1 << 40, "4096": 4096, " 8G ": 8 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-5G", "lots", "5X", "0"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}
