//go:build !embedserver

package main

import "net"

// isLoopback reports whether host (a --host or --addr's host) is a loopback
// address or localhost: only a server bound there may run without a token.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
