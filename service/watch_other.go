//go:build !linux

package service

import "github.com/srt-mcp/srt-mcp/nofollow"

// watchable: without /proc/self/fd a directory cannot be watched by its
// descriptor; the watch walks the workspace on a timer instead.
const watchable = false

func watchName(*nofollow.Dir) string { return "" }
