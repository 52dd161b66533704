//go:build !linux && !darwin

package runner

import (
	"context"
	"errors"
	"os"
)

// launch refuses: there is no sandbox on this platform, and srt-mcp never
// runs a command unsandboxed.
func launch(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, child [3]*os.File, opts Options) (sandboxProc, error) {
	return nil, errorf(ErrCodeUnavailable, "no sandbox is available on this platform (srt-mcp supports Linux with bubblewrap and macOS with sandbox-exec)")
}

// FindBwrap exists on every platform for srt-mcp doctor.
func FindBwrap() (string, error) { return "", errors.New("bubblewrap is Linux-only") }

func etcDir(string) string { return "" }

// fileOverlays: the sandbox's view can put a file of the runner's at any
// path (the trust bundle over the system bundle, a stand-in over a masked
// credential file); no sandbox here.
const fileOverlays = false

const ptyInsideSandbox = false

// sandboxUserSwitch: only the Linux runner changes the sandbox's uid.
const sandboxUserSwitch = false
