package service

import (
	"strconv"

	"github.com/srt-mcp/srt-mcp/nofollow"
)

// watchable: inotify can watch a directory through the descriptor the
// server opened it with.
const watchable = true

// watchName is the name inotify watches d by: its descriptor, so the
// watch is on the directory the server opened (without following a link),
// whatever its path has become.
func watchName(d *nofollow.Dir) string { return "/proc/self/fd/" + strconv.Itoa(d.Fd()) }
