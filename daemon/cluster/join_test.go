package cluster

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/rest"
)

// fakeJoinDeps records what HandleJoin asked for. HandleJoin's decisions are tested
// against it; the real Service (SQLite, CA) is tested end to end in https_test.go.
type fakeJoinDeps struct {
	verifyErr error
	member    bool
	k3sErr    error
	issued    []string
}

func (f *fakeJoinDeps) VerifyToken(context.Context, string, string) error { return f.verifyErr }
func (f *fakeJoinDeps) IsMember(context.Context, string) (bool, error)    { return f.member, nil }
func (f *fakeJoinDeps) IssueMemberCert(name string) ([]byte, []byte, error) {
	f.issued = append(f.issued, name)
	return []byte("CERT " + name), []byte("KEY"), nil
}
func (f *fakeJoinDeps) CACertPEM() []byte { return []byte("CA") }
func (f *fakeJoinDeps) K3sJoinInfo(context.Context) (string, string, error) {
	return "https://10.0.0.1:6443", "K10::node-token", f.k3sErr
}

func TestHandleJoin(t *testing.T) {
	ok := JoinRequest{Name: "node2", Secret: "s", Roles: []string{"compute", "network"}, Address: "10.0.0.2:7443"}
	with := func(f func(r *JoinRequest)) JoinRequest {
		r := ok
		r.Roles = append([]string(nil), ok.Roles...)
		f(&r)
		return r
	}
	cases := []struct {
		name    string
		req     JoinRequest
		deps    fakeJoinDeps
		status  int
		wantMsg string
	}{
		{name: "ok", req: ok, status: http.StatusOK},
		{name: "no roles means compute", req: with(func(r *JoinRequest) { r.Roles = nil }), status: http.StatusOK},
		{name: "bad name", req: with(func(r *JoinRequest) { r.Name = "node 2" }), status: http.StatusBadRequest, wantMsg: "member name"},
		{name: "no secret", req: with(func(r *JoinRequest) { r.Secret = "" }), status: http.StatusBadRequest, wantMsg: "no secret"},
		{name: "bad role", req: with(func(r *JoinRequest) { r.Roles = []string{"gpu"} }), status: http.StatusBadRequest, wantMsg: `unknown role "gpu"`},
		{name: "bad address", req: with(func(r *JoinRequest) { r.Address = "10.0.0.2" }), status: http.StatusBadRequest, wantMsg: "not host:port"},
		{name: "bad secret", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenSecret, "nope")}, status: http.StatusUnauthorized, wantMsg: "nope"},
		{name: "unknown token", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenUnknown, "none")}, status: http.StatusUnauthorized},
		{name: "expired", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenExpired, "late")}, status: http.StatusForbidden},
		{name: "revoked", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenRevoked, "gone")}, status: http.StatusForbidden},
		{name: "consumed", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenConsumed, "used")}, status: http.StatusForbidden},
		{name: "wrong name", req: ok, deps: fakeJoinDeps{verifyErr: errorf(ErrTokenWrongName, "other")}, status: http.StatusForbidden},
		{name: "already a member", req: ok, deps: fakeJoinDeps{member: true}, status: http.StatusConflict, wantMsg: "already a member"},
		{name: "k3s not ready", req: ok, deps: fakeJoinDeps{k3sErr: errors.New("no node token yet")}, status: http.StatusServiceUnavailable, wantMsg: "no node token yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deps := c.deps
			resp, err := HandleJoin(context.Background(), &deps, c.req)
			if got := rest.StatusFor(err); got != c.status {
				t.Fatalf("StatusFor(HandleJoin()) = %d (%v), want %d", got, err, c.status)
			}
			if c.status != http.StatusOK {
				if !strings.Contains(err.Error(), c.wantMsg) {
					t.Errorf("HandleJoin() = %q, want it to contain %q", err, c.wantMsg)
				}
				if len(deps.issued) != 0 {
					t.Errorf("HandleJoin() refused but issued certificates for %v, want none", deps.issued)
				}
				return
			}
			want := JoinResponse{MemberCertPEM: "CERT node2", MemberKeyPEM: "KEY", CACertPEM: "CA",
				K3sServerURL: "https://10.0.0.1:6443", K3sToken: "K10::node-token"}
			if resp != want {
				t.Errorf("HandleJoin() = %+v, want %+v", resp, want)
			}
		})
	}
}
