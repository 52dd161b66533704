package main

import (
	"os"
	"path/filepath"
)

// defaultStateDir is /var/lib/srt-mcp for root, else the XDG state home.
func defaultStateDir(home string) string {
	if os.Geteuid() == 0 {
		return "/var/lib/srt-mcp"
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "srt-mcp")
	}
	return filepath.Join(home, ".local", "state", "srt-mcp")
}
