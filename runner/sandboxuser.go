package runner

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// SandboxUser is the unprivileged host uid and gid a root runner's
// sandboxes run as: untrusted code never runs as host uid 0. Files a
// sandbox creates in writable paths belong to it.
type SandboxUser struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// DefaultSandboxUID is the uid (and gid) of DefaultSandboxUser: by
// convention an unused "nonroot" id (distroless images use the same), with
// no account, no home and no login on a normal host.
const DefaultSandboxUID = 65532

// DefaultSandboxUser is who a root runner's sandboxes are when the caller
// names nobody.
var DefaultSandboxUser = SandboxUser{UID: DefaultSandboxUID, GID: DefaultSandboxUID}

func (u SandboxUser) String() string { return fmt.Sprintf("%d:%d", u.UID, u.GID) }

// Check refuses identities that are root.
func (u SandboxUser) Check() error {
	if u.UID <= 0 || u.GID <= 0 {
		return fmt.Errorf("the sandbox user %s is root (or negative); sandboxes never run as uid or gid 0: name an unprivileged user", u)
	}
	return nil
}

// ParseSandboxUser reads --sandbox-user: "" (the default), a user name
// (its primary group), "NAME:GROUP", "UID" (gid = uid) or "UID:GID".
func ParseSandboxUser(s string) (SandboxUser, error) {
	if s == "" {
		return DefaultSandboxUser, nil
	}
	us, gs, hasGroup := strings.Cut(s, ":")
	var out SandboxUser
	if n, err := strconv.Atoi(us); err == nil {
		out = SandboxUser{UID: n, GID: n}
	} else {
		u, err := user.Lookup(us)
		if err != nil {
			return out, fmt.Errorf("sandbox user %q: %v (give a user name from /etc/passwd, or UID[:GID])", us, err)
		}
		out.UID, _ = strconv.Atoi(u.Uid)
		out.GID, _ = strconv.Atoi(u.Gid)
	}
	if hasGroup {
		if n, err := strconv.Atoi(gs); err == nil {
			out.GID = n
		} else {
			g, err := user.LookupGroup(gs)
			if err != nil {
				return out, fmt.Errorf("sandbox group %q: %v", gs, err)
			}
			out.GID, _ = strconv.Atoi(g.Gid)
		}
	}
	return out, out.Check()
}
