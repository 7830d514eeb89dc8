// Package cluster owns what makes several osd daemons one cluster: the cluster CA and
// the certificates it issues (server, member), join tokens (wire encoding, issuing,
// verification, single use), the trust decision for mTLS API callers, the pinned TLS
// configuration a joiner uses, and the server side of the join handshake.
//
// Storage lives in daemon/store (tables tokens, trust, members); this package holds the
// rules. Decisions that need no I/O (renewal, token decoding, name and role validation,
// error mapping) are pure functions.
package cluster
