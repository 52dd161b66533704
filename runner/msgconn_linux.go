package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxMsgFiles bounds the fds one message carries (the go message's: the
// run's pipe, three stdio, a report pipe, one cgroup file per hierarchy).
const maxMsgFiles = 16

// msgConn carries initMsgs over a SOCK_SEQPACKET socket: one message per
// datagram, with fds attached as SCM_RIGHTS.
type msgConn struct {
	c *net.UnixConn
	// relay: the fds received are passed on as they came (srt-init's
	// relay of the command's stdio), not made non-blocking for deadlines:
	// O_NONBLOCK is the open file's, and the command would inherit it.
	relay bool
}

func newMsgConn(f *os.File) (*msgConn, error) {
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, errors.New("not a unix socket")
	}
	return &msgConn{c: uc}, nil
}

// encodeMsg is one datagram: the JSON message and its fds as SCM_RIGHTS.
func encodeMsg(msg initMsg, files []*os.File) (b, oob []byte, err error) {
	if b, err = json.Marshal(msg); err != nil {
		return nil, nil, err
	}
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	return b, oob, nil
}

func (m *msgConn) send(msg initMsg, files ...*os.File) error {
	b, oob, err := encodeMsg(msg, files)
	if err != nil {
		return err
	}
	_, _, err = m.c.WriteMsgUnix(b, oob, nil)
	return err
}

// recv reads one message and the files that came with it.
func (m *msgConn) recv() (initMsg, []*os.File, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(maxMsgFiles*4))
	n, oobn, _, _, err := m.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return initMsg{}, nil, err
	}
	msg, files, err := decodeMsg(buf[:n], oob[:oobn], func(fd int) {
		unix.CloseOnExec(fd)
		if !m.relay {
			_ = unix.SetNonblock(fd, true) // so deadlines work
		}
	})
	if err != nil && err != errConnClosed {
		return msg, nil, fmt.Errorf("malformed message from the sandbox: %v", err)
	}
	return msg, files, err
}

var errConnClosed = errors.New("connection closed")

// decodeMsg is encodeMsg undone: the JSON message and the fds that came
// with it, each passed to prepare first. On an error (no message, bad
// JSON) the fds are closed.
func decodeMsg(b, oob []byte, prepare func(fd int)) (initMsg, []*os.File, error) {
	var msg initMsg
	var files []*os.File
	if scms, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, scm := range scms {
			fds, err := unix.ParseUnixRights(&scm)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				prepare(fd)
				files = append(files, os.NewFile(uintptr(fd), "received"))
			}
		}
	}
	err := errConnClosed
	if len(b) > 0 {
		err = json.Unmarshal(b, &msg)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return msg, nil, err
	}
	return msg, files, nil
}

func (m *msgConn) setDeadline(t time.Time) { _ = m.c.SetDeadline(t) }

func (m *msgConn) close() { m.c.Close() }

// rawConn speaks the same datagrams as msgConn with plain blocking
// syscalls; the exec stage uses it to stay off the runtime's poller.
type rawConn int

func (c rawConn) send(msg initMsg, files ...*os.File) error {
	b, oob, err := encodeMsg(msg, files)
	if err != nil {
		return err
	}
	return unix.Sendmsg(int(c), b, oob, nil, 0)
}

func (c rawConn) recv() (initMsg, []*os.File, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(maxMsgFiles*4))
	n, oobn, _, _, err := unix.Recvmsg(int(c), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return initMsg{}, nil, err
	}
	return decodeMsg(buf[:n], oob[:oobn], func(int) {}) // blocking: off the runtime's poller
}
