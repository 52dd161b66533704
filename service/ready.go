package service

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/srt-mcp/srt-mcp/executions"
	"github.com/srt-mcp/srt-mcp/runner"
)

// MinFreeBytes is the free space the state directory needs to be ready.
const MinFreeBytes = 256 << 20

// Check is one readiness check's outcome.
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Ready checks that runs can start now: a real sandbox runs /bin/true
// (the native sandbox runs commands on every backend), the backend is
// ready (Docker: the engine answers and has the image), and the state
// directory has room.
func (s *Service) Ready(ctx context.Context) (bool, map[string]Check) {
	checks := map[string]Check{}
	ok := true
	fail := func(name, why string) {
		ok = false
		checks[name] = Check{Error: why}
	}
	if s.backend.Name() != "native" {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		detail, err := s.backend.Ready(bctx)
		cancel()
		if err != nil {
			fail(s.backend.Name(), err.Error())
		} else {
			checks[s.backend.Name()] = Check{OK: true, Detail: detail}
		}
	}
	p := s.Ceiling()
	p.Limits.Timeout = 0
	spec := runner.Spec{Version: runner.SpecVersion, Argv: []string{"/bin/true"}, Cwd: runner.SandboxTmp, PrivateCwd: true, Policy: p, Stdin: runner.StdinNull}
	start := time.Now()
	e, err := s.mgr.StartWith(executions.Owner{Key: probeOwner}, "readiness probe", spec, s.sandbox)
	if err != nil {
		fail("sandbox", err.Error())
	} else {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sn := e.Wait(cctx, 0, true)
		cancel()
		if sn.End == nil || sn.End.Type != runner.EventExit || sn.End.ExitCode != 0 {
			why := "no result in 10 s"
			if sn.End != nil {
				why = sn.End.Type + " " + sn.End.ErrCode + " " + sn.End.Message
			}
			fail("sandbox", "bubblewrap could not run /bin/true: "+why)
		} else {
			checks["sandbox"] = Check{OK: true, Detail: fmt.Sprintf("bubblewrap ran /bin/true in %d ms", time.Since(start).Milliseconds())}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.reg.StateDir(), &st); err != nil {
		fail("disk", err.Error())
	} else if free := int64(st.Bavail) * int64(st.Bsize); free < MinFreeBytes {
		fail("disk", fmt.Sprintf("%d MB free in the state directory, less than %d MB", free>>20, MinFreeBytes>>20))
	} else {
		checks["disk"] = Check{OK: true, Detail: fmt.Sprintf("%d MB free", free>>20)}
	}
	return ok, checks
}
