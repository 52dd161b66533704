//go:build !linux

package runner

import "github.com/srt-mcp/srt-mcp/nofollow"

// tighten: only Linux writes a tree as its owner (idmapped mounts).
func (s *sweeper) tighten(*nofollow.Dir, string) {}
