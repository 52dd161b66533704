//go:build !linux && !embedserver

package main

import (
	"os"
	"runtime"
)

// hostChecks reports the platform's sandbox front end.
func hostChecks() []check {
	if runtime.GOOS != "darwin" {
		return []check{{Name: "platform", Status: "missing", Detail: runtime.GOOS + " has no supported sandbox (Linux: bubblewrap, macOS: sandbox-exec)"}}
	}
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err != nil {
		return []check{{Name: "sandbox-exec", Status: "missing", Detail: "/usr/bin/sandbox-exec not found"}}
	}
	return []check{{Name: "sandbox-exec", Status: "ok", Detail: "/usr/bin/sandbox-exec (seatbelt); limits via ulimit"}}
}

// containerChecks: containers are a Linux matter.
func containerChecks() []check { return nil }
