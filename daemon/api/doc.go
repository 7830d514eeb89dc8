// Package api owns the daemon's wire types: the JSON envelope every REST answer is wrapped
// in and the resources the endpoints return. It is pure data with no I/O, so the daemon,
// the CLI and joining nodes can all import it cheaply.
package api

// Version is the osd version, set at link time with
// -X github.com/osdcloud/osd/daemon/api.Version=...
var Version = "dev"
