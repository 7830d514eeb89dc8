package cluster

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/client"
)

// BenchmarkMTLSRequests measures API latency over mTLS with 100 concurrent clients, each
// on its own connection with a trusted client certificate, against the real router,
// authorizer and TLS configuration. It reports p50 and p99 latency and throughput.
func BenchmarkMTLSRequests(b *testing.B) {
	const clients = 100
	tc := startCluster(b)
	cert := tc.trustedClient(b, "bench")
	ctx := context.Background()
	cs := make([]*client.Client, clients)
	for i := range cs {
		cs[i] = tc.client(b, cert) // its own transport: its own TLS session
		if err := cs[i].Query(ctx, http.MethodGet, "protected", nil, nil); err != nil {
			b.Fatalf("warm-up GET protected = %v", err)
		}
	}
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for i := range cs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t := time.Now()
				if err := cs[i].Query(ctx, http.MethodGet, "protected", nil, nil); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(t))
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatalf("GET protected = %v", err)
	default:
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
}

// BenchmarkMTLSNewConnection measures one request on a fresh mTLS connection (TLS 1.3
// handshake with client certificate, authorization, answer): what a CLI call pays.
func BenchmarkMTLSNewConnection(b *testing.B) {
	tc := startCluster(b)
	cert := tc.trustedClient(b, "bench")
	cfg, err := ClientTLSConfigFor(tc.ca.Fingerprint(), tc.addr, cert)
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	c := client.New("https://"+tc.addr, hc)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if err := c.Query(ctx, http.MethodGet, "protected", nil, nil); err != nil {
			b.Fatalf("GET protected = %v", err)
		}
	}
}
