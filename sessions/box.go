package sessions

import "github.com/srt-mcp/srt-mcp/backend"

// BoxOf is what a backend knows of ss: its id, the host directories it
// mounts and its own uid.
func BoxOf(ss *Session) backend.Box {
	return backend.Box{SessionID: ss.ID, Workspace: ss.Workspace, Cache: ss.Cache, UID: ss.uid}
}
