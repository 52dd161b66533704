package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A pooled runner serves one execution after another: after the first
// (on fds 3-5, as any runner), the parent hands it each next execution's
// three pipes over a unix stream socket, one byte with the three fds as
// SCM_RIGHTS; EOF on the socket tells it to exit. Being a process (the Go
// runtime's start and exit, page faults, the exec of the binary) was ~60%
// of a runner's CPU per cold run, measured; a pooled runner pays it once.
//
//	parent (Pool)                                  runner
//	  |  fds 3-5: the first execution (see protocol.go)
//	  | <------------------------------------------- | ... terminal event, then EOF on fd 4
//	  |  socket (argv "handoff-fd=N"): 'r' + [spec, events, control]
//	  | -------------------------------------------> | the next execution on those
//	  | <------------------------------------------- | ... terminal event, then EOF on its events pipe
//	  |  socket EOF                                   | exits
//
// A runner asked to start the next run's sandbox (Spec.Prestart) says on
// the same socket when it is ready: "R<n>\n" after its n-th execution; and
// "N<n>\n" when it holds none after it (none was asked for, the run did
// not start, or the sandbox could not be started).
const (
	prestartReady = 'R'
	prestartNone  = 'N'

	argHandoffPrefix = "handoff-fd="
	// maxRunsPerRunner bounds what one runner process serves before the
	// pool lets it go (whatever a run left behind goes with it).
	maxRunsPerRunner = 200
)

// handoffFD is the fd argv names for the next executions, -1 if none.
func handoffFD(args []string) int {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, argHandoffPrefix); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 2 {
				return n
			}
		}
	}
	return -1
}

// readReady follows what a runner says on its hand-off socket: after which
// of its executions (by number) it holds a sandbox ready for the next one,
// and after which it holds none.
func (r *spawned) readReady() {
	sc := bufio.NewScanner(r.hand)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			continue
		}
		switch line[0] {
		case prestartReady:
			r.readyAfter.Store(int64(n))
		case prestartNone:
			r.noneAfter.Store(int64(n))
		}
	}
}

// sendRun hands a runner the child ends of one execution's pipes.
func sendRun(sock *os.File, spec, events, control *os.File) error {
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	rights := unix.UnixRights(int(spec.Fd()), int(events.Fd()), int(control.Fd()))
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte{'r'}, rights, nil, unix.MSG_NOSIGNAL)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err != nil {
		return err
	}
	return serr
}

// receiveRun waits for the next execution's pipes; io.EOF-like errors mean
// the parent let this runner go.
func receiveRun(sock int) (spec, events, control *os.File, err error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, rerr := unix.Recvmsg(sock, buf, oob, recvCloexec)
		if errors.Is(rerr, unix.EINTR) {
			continue
		}
		if rerr != nil {
			return nil, nil, nil, rerr
		}
		if n == 0 {
			return nil, nil, nil, errors.New("the pool closed the hand-off socket")
		}
		var fds []int
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if got, perr := unix.ParseUnixRights(&m); perr == nil {
					for _, fd := range got {
						unix.CloseOnExec(fd)
					}
					fds = append(fds, got...)
				}
			}
		}
		if buf[0] != 'r' || len(fds) != 3 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, nil, nil, fmt.Errorf("bad hand-off message (%q with %d fds)", buf[:n], len(fds))
		}
		return os.NewFile(uintptr(fds[0]), "spec"), os.NewFile(uintptr(fds[1]), "events"), os.NewFile(uintptr(fds[2]), "control"), nil
	}
}
