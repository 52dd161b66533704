package sessions

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/srt-mcp/srt-mcp/runner"
)

// Box is what a backend knows of a data session: its id and the host
// directories it mounts (the workspace at /mnt/data, the cache at the
// sandbox's ~/.cache). Files move between the server and a session through
// these host directories whatever the backend, so uploads, artifacts and
// downloads are the same code for every backend.
type Box struct {
	SessionID string
	Workspace string
	Cache     string
	// UID is the session's own host uid (and gid) its sandboxes run as; 0:
	// the backend's default.
	UID int
}

// BoxOf returns the Box of a session.
func BoxOf(ss *Session) Box {
	return Box{SessionID: ss.ID, Workspace: ss.Workspace, Cache: ss.Cache, UID: ss.uid}
}

// CacheMount is where a session's cache directory appears.
const CacheMount = runner.SandboxHome + "/.cache"

// SitePackages is where install_package puts a session's packages (in its
// cache directory: the session's own, never the host's).
const SitePackages = CacheMount + "/site-packages"

// Env is the environment of every data-session run: matplotlib
// writes its font cache to the session's cache, kept between runs, and
// the session's installed packages are importable.
func Env() map[string]string {
	return map[string]string{"MPLCONFIGDIR": CacheMount + "/matplotlib", "XDG_CACHE_HOME": CacheMount,
		"PYTHONPATH": SitePackages}
}

// ForConversation is the session id of a seed 003 conversation (sess_ + 12
// hex of a hash of its id): its files are the ones every tool sees under
// that id.
func ForConversation(conversationID string) string {
	h := sha256.Sum256([]byte("srt-mcp conversation\x00" + conversationID))
	return "sess_" + hex.EncodeToString(h[:6])
}
