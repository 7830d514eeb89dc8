package test

import "testing"

// TestBusyboxRTT reads busybox ping's summary, and nothing from a ping that got no
// answer or from iputils' summary.
func TestBusyboxRTT(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		loss      int
		avg       float64
		ok        bool
	}{
		{"all back", "PING 10.0.0.5 (10.0.0.5): 56 data bytes\n\n--- 10.0.0.5 ping statistics ---\n20 packets transmitted, 20 packets received, 0% packet loss\nround-trip min/avg/max = 0.912/1.534/3.020 ms\n", 0, 1.534, true},
		{"some lost", "logged in as osd\n--- 10.0.0.7 ping statistics ---\n20 packets transmitted, 19 packets received, 5% packet loss\nround-trip min/avg/max = 1.101/2.250/9.875 ms\n", 5, 2.25, true},
		{"none back", "--- 10.0.0.7 ping statistics ---\n20 packets transmitted, 0 packets received, 100% packet loss\n", 0, 0, false},
		{"permission denied", "logged in as osd\nping: permission denied (are you root?)\n", 0, 0, false},
		{"iputils", "20 packets transmitted, 20 received, 0% packet loss, time 3805ms\nrtt min/avg/max/mdev = 0.041/0.052/0.071/0.008 ms\n", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loss, avg, ok := busyboxRTT(tc.out)
			if loss != tc.loss || avg != tc.avg || ok != tc.ok {
				t.Errorf("busyboxRTT(%q) = %d, %v, %v, want %d, %v, %v", tc.out, loss, avg, ok, tc.loss, tc.avg, tc.ok)
			}
		})
	}
}
