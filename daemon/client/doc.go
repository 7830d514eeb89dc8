// Package client owns the REST client of the osd daemon, used by the CLI over the
// root-only unix socket and later by joining nodes over HTTPS. It speaks the envelope of
// package api and turns error envelopes back into errors that match rest's sentinels.
package client
