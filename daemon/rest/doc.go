// Package rest owns the daemon's HTTP mechanism: the endpoint registry under /1.0, the
// response values handlers return (they never touch the http.ResponseWriter), the single
// mapping from wrapped sentinel errors to HTTP status codes, strict JSON request decoding,
// and the root-only unix socket listener and server.
package rest
