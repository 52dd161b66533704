package runner

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SeatbeltOptions are the parts of a macOS sandbox profile that do not come
// from the mount plan.
type SeatbeltOptions struct {
	// TmpDir is the host directory that serves as the sandbox's private
	// /tmp and HOME (macOS has no mount namespaces).
	TmpDir string
	// ProxyPorts are loopback ports the command may connect to (the
	// execution's filtering proxy); nothing else on the network is reachable.
	ProxyPorts []int
}

// seatbeltSystem is what every macOS sandbox may read: the OS, its
// frameworks and dyld's shared cache, and the small part of /private/etc and
// /private/var the C library needs. It mirrors policy.SystemView.
var seatbeltSystem = []string{
	"/usr", "/bin", "/sbin", "/System", "/Library/Frameworks", "/Library/Apple",
	"/private/etc", "/private/var/db/timezone", "/private/var/db/dyld",
	"/System/Volumes/Preboot/Cryptexes", "/opt/homebrew", "/usr/local",
}

// SeatbeltProfile builds a sandbox-exec (SBPL) profile from the same plan the
// bubblewrap builder uses. It is pure and pinned by testdata/.
//
// SBPL is last-match-wins, so rules are emitted in plan order (a parent
// before its children), the same order in which bwrap stacks its mounts:
// a deeper deny or allow overrides its parent. Paths must already be
// canonical (the plan resolved symlinks; on macOS /tmp is /private/tmp).
// Process rules confine signals and process inspection to the sandbox
// itself; networking is denied except to the proxy's loopback ports.
func SeatbeltProfile(plan *Plan, o SeatbeltOptions) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("(version 1)")
	w("(deny default)")
	w("(allow process-exec process-fork)")
	w("(allow signal (target same-sandbox))")
	w("(allow process-info* (target same-sandbox))")
	w("(allow sysctl-read)")
	w("(allow ipc-posix-shm ipc-posix-sem)")
	w("(allow mach-lookup (global-name \"com.apple.system.logger\") (global-name \"com.apple.system.opendirectoryd.libinfo\") (global-name \"com.apple.system.notification_center\") (global-name \"com.apple.trustd.agent\"))")
	w("(allow file-read-metadata (literal \"/\"))")
	w("(allow file-read* file-write-data file-ioctl (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/random\") (literal \"/dev/urandom\") (literal \"/dev/tty\") (literal \"/dev/dtracehelper\"))")
	w("(allow file-read* file-write* file-ioctl (regex #\"^/dev/ttys[0-9]+$\") (literal \"/dev/ptmx\"))")
	w("(allow pseudo-tty)")
	for _, p := range seatbeltSystem {
		w("(allow file-read* (subpath %s))", sbString(p))
	}
	if o.TmpDir != "" {
		w("(allow file-read* file-write* (subpath %s))", sbString(o.TmpDir))
	}
	for _, m := range plan.Mounts {
		switch m.Kind {
		case MountRO:
			w("(allow file-read* (subpath %s))", sbString(m.Src))
			w("(deny file-write* (subpath %s))", sbString(m.Src))
		case MountRW:
			w("(allow file-read* file-write* (subpath %s))", sbString(m.Src))
		case MountTmpfs:
			if m.Dst == SandboxTmp || m.Dst == SandboxShm {
				continue // the private TmpDir stands in for these
			}
			w("(deny file-read* file-write* (subpath %s))", sbString(m.Dst))
		case MountHideFile:
			w("(deny file-read* file-write* (literal %s))", sbString(m.Dst))
		case MountSymlink:
			w("(allow file-read* (literal %s))", sbString(m.Dst))
		}
	}
	// Protected names may not be created, renamed or removed, and neither
	// may the directories above them (a rename would move them away).
	for _, p := range plan.Protected {
		w("(deny file-write* (subpath %s))", sbString(p))
	}
	// The network is srt's restricted form without allowLocalBinding, less
	// its bind and inbound on the proxy ports (the runner holds those; the
	// command only connects): connect to the proxy's ports on loopback and
	// nothing else, no unix socket, and no resolver's mach service above.
	// The command resolves no names itself; its clients hand them to the
	// proxy (HTTP absolute-form and CONNECT, socks5h). "localhost" matches
	// 127.0.0.1 and ::1, not ::ffff:127.0.0.1, so a dual-stack client
	// (Java) must connect over IPv4, as srt notes. A remote filter, never a
	// local one: (local ip …) on outbound matches every connect (srt #131,
	// #225).
	w("(deny network*)")
	for _, port := range o.ProxyPorts {
		w("(allow network-outbound (remote ip \"localhost:%d\"))", port)
	}
	return b.String()
}

func sbString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}
