package netsetup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkEnsureExternalNetwork measures host preparation of br-ex + NAT in a
// private OVS inside a namespace: cold (after Teardown) and no-op (converged).
func BenchmarkEnsureExternalNetwork(b *testing.B) {
	requireHost(b)
	l := newNATLab(b)
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if err := Teardown(ctx, l.h, l.spec); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if changed, err := EnsureExternalNetwork(ctx, l.h, l.spec); err != nil || !changed {
				b.Fatalf("EnsureExternalNetwork = %v, %v, want true, nil", changed, err)
			}
		}
	})
	b.Run("noop", func(b *testing.B) {
		if _, err := EnsureExternalNetwork(ctx, l.h, l.spec); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if changed, err := EnsureExternalNetwork(ctx, l.h, l.spec); err != nil || changed {
				b.Fatalf("EnsureExternalNetwork = %v, %v, want false, nil", changed, err)
			}
		}
	})
}

// BenchmarkEnsureOVS measures starting a private OVS from nothing (new database,
// both daemons) and the no-op check of a running one.
func BenchmarkEnsureOVS(b *testing.B) {
	requireHost(b)
	ns := newNetNS(b, "host")
	c := startPrivateOVS(b, ns)
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if err := StopOVS(ctx, c); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(filepath.Join(c.DBDir, "conf.db")); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if changed, err := EnsureOVS(ctx, c); err != nil || !changed {
				b.Fatalf("EnsureOVS = %v, %v, want true, nil", changed, err)
			}
		}
	})
	b.Run("noop", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if changed, err := EnsureOVS(ctx, c); err != nil || changed {
				b.Fatalf("EnsureOVS = %v, %v, want false, nil", changed, err)
			}
		}
	})
}
