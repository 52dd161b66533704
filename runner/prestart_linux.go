package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// prestarted is a sandbox a pooled runner started ahead of its next run:
// built from the last run's spec with nothing of that run in it (no argv,
// environment, stdio, working directory's contents), verified from inside
// and outside, and waiting at the go message (see initproto.go). The next
// run claims it when its own sandbox would be the same one (sandboxShape)
// and the sandbox is still the one verified (the exec stage's record, the
// mounts' sources); otherwise it is discarded and the run starts its own.
// A sandbox serves one run and is never reused.
type prestarted struct {
	sb      *startedSandbox
	r       *Run
	shape   string
	built   time.Time
	buildMS float64
	err     error // it could not be started (the outcome says why)
}

// startPrestarted starts a sandbox for a next run shaped like spec (run
// through the same checks and plan as the run itself). Interactive runs
// (the terminal is opened when the sandbox starts) and runs with idmapped
// roots or files of their own over the view (the trust bundle, masked
// credentials: made per run) are not pre-started.
func startPrestarted(spec Spec, opts Options) *prestarted {
	began := time.Now()
	t := &prestarted{}
	fail := func(err error) *prestarted {
		tr("prestart failed: " + err.Error())
		t.err, t.built = err, time.Now()
		t.buildMS = msSince(began)
		return t
	}
	if spec.Stdin == StdinPTY {
		return fail(errors.New("an interactive run's terminal is opened when its sandbox starts"))
	}
	if len(spec.Mounts) > 0 {
		// A data session's workspace (often a filesystem of its own, which
		// a waiting sandbox would keep mounted past the session's end).
		return fail(errors.New("a run with mounts of its own starts its sandbox itself"))
	}
	spec.ID = "prestart-" + newToken()
	spec.Prestart, spec.Egress, spec.Env = false, nil, nil
	r := &Run{spec: spec, start: began, done: make(chan struct{})}
	if err := r.resolve(&opts); err != nil {
		return fail(err)
	}
	if len(r.egressPrep.overlay) > 0 {
		r.egressPrep.removeAll()
		return fail(errors.New("the run puts files of its own over the sandbox's view"))
	}
	cfg := &initConfig{Proxy: opts.Egress != nil, Prestarted: true}
	shape, err := sandboxShape(r, r.plan, cfg)
	if err != nil {
		return fail(err)
	}
	sb, err := startSandbox(context.Background(), r, r.plan, cfg, opts)
	if err != nil {
		return fail(err)
	}
	t.sb, t.r, t.shape = sb, r, shape
	t.built = time.Now()
	t.buildMS = msSince(began)
	return t
}

// begin starts the claim's check at once (a run is there for the sandbox):
// the stage looks at the sandbox while the runner plans the run.
func (t *prestarted) begin() {
	if t.ready() {
		if err := t.sb.unnice(); err != nil {
			t.err = err
			t.discard()
			return
		}
		t.sb.beginCheck()
	}
}

// ready reports whether the sandbox started and waits for its run.
func (t *prestarted) ready() bool { return t != nil && t.sb != nil }

// prestartNice is the nice value a root runner starts sandboxes ahead of
// their runs at: their start takes the CPU that running work leaves, and
// the claim puts them back at 0 before anything of the run happens
// (unprivileged, a process can raise its nice value but never lower it
// again, so an unprivileged runner starts them at 0).
const prestartNice = 19

// startPrestartedQuietly is startPrestarted at prestartNice when the runner
// is root: from a thread of its own at that nice value (bwrap is forked from
// it and inherits it, and so its sandbox), which then gets 0 back. The
// thread must live on: bwrap's parent-death signal is tied to it.
func startPrestartedQuietly(spec Spec, opts Options) *prestarted {
	if os.Geteuid() != 0 {
		return startPrestarted(spec, opts)
	}
	runtime.LockOSThread()
	niced := unix.Setpriority(unix.PRIO_PROCESS, 0, prestartNice) == nil
	t := startPrestarted(spec, opts)
	if niced && unix.Setpriority(unix.PRIO_PROCESS, 0, 0) != nil {
		// Not back at 0: the thread goes, and its children with it.
		t.discard()
		return &prestarted{err: errors.New("cannot give the runner's thread its priority back")}
	}
	runtime.UnlockOSThread()
	if t.ready() {
		t.sb.niced = niced
	}
	return t
}

// unnice puts a pre-started sandbox's processes (bwrap's PID 1 and the exec
// stage, which becomes the command) back at nice 0.
func (sb *startedSandbox) unnice() error {
	if !sb.niced {
		return nil
	}
	sb.niced = false
	for _, pid := range []int{sb.p.pid1, sb.stage} {
		if pid <= 0 {
			return errors.New("the sandbox's processes are not known")
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, 0); err != nil {
			return fmt.Errorf("cannot give the sandbox its priority back: %v", err)
		}
	}
	return nil
}

// discard ends a pre-started sandbox no run claimed.
func (t *prestarted) discard() {
	if t == nil || t.sb == nil {
		return
	}
	t.sb.discard()
	t.sb = nil
}

// sandboxShape is everything a sandbox depends on besides what comes with
// the go message: the resolved plan (every mount, the working directory,
// what the sweep checks after the run), the host identity it runs as, the
// limits its cgroups enforce, its PID 1 and its proxy listeners. Two runs
// of one shape get the same sandbox.
func sandboxShape(r *Run, plan *Plan, cfg *initConfig) (string, error) {
	l := r.spec.Policy.Limits
	// What the exec stage applies per run (rlimits) and what the runner
	// enforces outside (the timeout, the output cap) are the run's.
	l.Timeout, l.MaxOutputBytes, l.MaxFileSizeBytes, l.MaxOpenFiles = 0, 0, 0, 0
	shape := struct {
		Plan   *Plan  `json:"plan"`
		UID    int    `json:"uid"`
		GID    int    `json:"gid"`
		Limits any    `json:"limits"`
		Init   string `json:"init"`
		Proxy  bool   `json:"proxy"`
		PTY    bool   `json:"pty"`
		Cache  string `json:"cache"`
		Tenant string `json:"tenant"`
	}{Plan: plan, UID: -1, GID: -1, Limits: l, Init: r.spec.Init, Proxy: cfg.Proxy, PTY: cfg.PTY, Cache: r.cache, Tenant: r.spec.Tenant}
	if u, ok := r.sandboxIdentity(); ok {
		shape.UID, shape.GID = u.UID, u.GID
	}
	b, err := json.Marshal(shape)
	return string(b), err
}

// claim runs r in the pre-started sandbox opts carries when it fits r
// (the outcome goes to r.prestart either way); nil, nil: start a sandbox
// for r instead (one that did not fit, or changed, is discarded).
func claim(ctx context.Context, r *Run, plan *Plan, cfg *initConfig, child [3]*os.File, opts Options) (sandboxProc, error) {
	t := opts.prestarted
	if t == nil {
		return nil, nil
	}
	out := &PrestartOutcome{BuildMS: t.buildMS, WaitMS: msSince(t.built)}
	r.prestart = out
	if t.err != nil {
		out.Result, out.Reason = PrestartFailed, t.err.Error()
		if e := (*Error)(nil); errors.As(t.err, &e) && e.Code == ErrCodeVerification {
			// Refused at its start: something reached it before its
			// record (a process joining it, a file in its directories).
			out.Result = PrestartChanged
		}
		return nil, nil
	}
	if err := t.sb.unnice(); err != nil {
		out.Result, out.Reason = PrestartFailed, err.Error()
		t.discard()
		return nil, nil
	}
	shape, err := sandboxShape(r, plan, cfg)
	if err != nil || shape != t.shape {
		out.Result, out.Reason = PrestartUnfit, "the run's sandbox differs from the one started ahead of it"
		t.discard()
		return nil, nil
	}
	if !t.sb.p.cgroup.present() {
		out.Result, out.Reason = PrestartChanged, "its cgroup was removed while it waited"
		t.discard()
		return nil, nil
	}
	// Each bind mount's source is still the object mounted: a path
	// replaced since (renamed away, swapped for another directory) would
	// be mounted anew by a sandbox started now.
	for _, m := range t.sb.mounted {
		var st unix.Stat_t
		if err := unix.Lstat(m.Src, &st); err != nil || uint64(st.Dev) != m.Dev || st.Ino != m.Ino {
			out.Result, out.Reason = PrestartChanged, fmt.Sprintf("%s is no longer the object mounted from it", m.Src)
			t.discard()
			return nil, nil
		}
	}
	// As root the sources were opened by the runner: a sandbox started now
	// would be refused a source its user can no longer reach by path (an
	// owner who took search permission off a directory above it revoked
	// that access), or would mount it another way (idmapped).
	if u, ok := r.sandboxIdentity(); ok {
		if e := checkAccessAs(u, plan, r.spec.Mounts, nil); e != nil {
			out.Result, out.Reason = PrestartChanged, "the sandbox user's access changed since the sandbox started"
			t.discard()
			return nil, nil
		}
	}
	if err := t.sb.check(ctx); err != nil {
		out.Result, out.Reason = PrestartChanged, err.Error()
		t.discard()
		return nil, nil
	}
	tr("claimed")
	out.Result = PrestartClaimed
	sb := t.sb
	t.sb = nil
	sb.cfg.runConfig = cfg.runConfig
	// The sandbox's cgroups and the files its start made are the run's
	// now (the plans are the same).
	t.r.egressPrep.removeAll()
	return sb.run(ctx, r, child)
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
