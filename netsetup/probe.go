package netsetup

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// PingProbe returns the default probe: the gateway answers an ICMP echo request,
// sent from the namespace at nsPath ("" = current), before the context ends. With no
// gateway there is nothing to check and it succeeds.
func PingProbe(nsPath string) ProbeFunc {
	return func(ctx context.Context, gateway string) error {
		if gateway == "" {
			slog.Warn("netsetup: no default gateway to probe; assuming connectivity")
			return nil
		}
		return Ping(ctx, nsPath, gateway)
	}
}

// Ping sends ICMP echo requests to dst from the namespace at nsPath until one is
// answered or ctx ends.
func Ping(ctx context.Context, nsPath, dst string) error {
	ip := net.ParseIP(dst).To4()
	if ip == nil {
		return fmt.Errorf("ping %q: not an IPv4 address", dst)
	}
	var conn net.PacketConn
	err := inNetNS(nsPath, func() error {
		var err error
		conn, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	defer conn.Close()
	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	id := binary.BigEndian.Uint16(idb[:])
	buf := make([]byte, 1500)
	for seq := uint16(1); ; seq++ {
		if _, err := conn.WriteTo(echoRequest(id, seq), &net.IPAddr{IP: ip}); err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		wait := time.Now().Add(500 * time.Millisecond)
		if d, ok := ctx.Deadline(); ok && d.Before(wait) {
			wait = d
		}
		_ = conn.SetReadDeadline(wait)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return fmt.Errorf("ping %s: %w", dst, err)
			}
			if isEchoReply(buf[:n], id) && from.(*net.IPAddr).IP.Equal(ip) {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ping %s: no answer: %w", dst, ctx.Err())
		}
	}
}

func echoRequest(id, seq uint16) []byte {
	b := make([]byte, 16)
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], "osdprobe")
	binary.BigEndian.PutUint16(b[2:], icmpChecksum(b))
	return b
}

func isEchoReply(b []byte, id uint16) bool {
	return len(b) >= 8 && b[0] == 0 && b[1] == 0 && binary.BigEndian.Uint16(b[4:]) == id
}

func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
