package test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// checkNoVNC: the server's noVNC console URL (openstack console url show) opens a
// websocket through nova-novncproxy to the guest's VNC server on its compute node: the
// first message is the RFB protocol version the proxy presents once it has negotiated
// with QEMU's VNC server (the console a browser shows in Horizon).
func checkNoVNC(t *testing.T, n *node, server string) {
	t.Helper()
	raw := n.field(t, "console", "url", "show", "--novnc", server, "-f", "value", "-c", "url")
	page, err := url.Parse(raw)
	if err != nil || page.Host == "" {
		t.Fatalf("console url show --novnc = %q (%v), want the noVNC page's URL", raw, err)
	}
	// vnc_lite.html?path=?token=TOKEN: the page opens the websocket at path.
	path := page.Query().Get("path")
	token := ""
	if q, err := url.ParseQuery(strings.TrimPrefix(path, "?")); err == nil {
		token = q.Get("token")
	}
	if token == "" {
		t.Fatalf("console URL %s names no token", raw)
	}
	ws := url.URL{Scheme: "ws", Host: page.Host, Path: "/", RawQuery: url.Values{"token": {token}}.Encode()}
	dialer := websocket.Dialer{HandshakeTimeout: 20 * time.Second, Subprotocols: []string{"binary"}}
	conn, resp, err := dialer.Dial(ws.String(), http.Header{})
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("websocket to the noVNC proxy %s: %v %s", page.Host, err, status)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil || !strings.HasPrefix(string(msg), "RFB 003.") {
		t.Fatalf("first message through the noVNC proxy = %q (%v), want the RFB version (RFB 003.xxx)", msg, err)
	}
	t.Logf("noVNC console of %s: %q through %s", server, strings.TrimSpace(string(msg)), page.Host)
}
