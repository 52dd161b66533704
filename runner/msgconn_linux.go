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

// msgConn carries initMsgs over a SOCK_SEQPACKET socket: one message per
// datagram, with fds attached as SCM_RIGHTS.
type msgConn struct {
	c *net.UnixConn
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
	var msg initMsg
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(8*4))
	n, oobn, _, _, err := m.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return msg, nil, err
	}
	if n == 0 {
		return msg, nil, errors.New("connection closed")
	}
	var files []*os.File
	if oobn > 0 {
		scms, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, scm := range scms {
				fds, err := unix.ParseUnixRights(&scm)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					unix.CloseOnExec(fd)
					_ = unix.SetNonblock(fd, true) // so deadlines work
					files = append(files, os.NewFile(uintptr(fd), "received"))
				}
			}
		}
	}
	if err := json.Unmarshal(buf[:n], &msg); err != nil {
		for _, f := range files {
			f.Close()
		}
		return msg, nil, fmt.Errorf("malformed message from the sandbox: %v", err)
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
	var msg initMsg
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(8*4))
	n, oobn, _, _, err := unix.Recvmsg(int(c), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return msg, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		scms, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, scm := range scms {
			fds, err := unix.ParseUnixRights(&scm)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "received"))
			}
		}
	}
	if n == 0 {
		err = errors.New("connection closed")
	} else {
		err = json.Unmarshal(buf[:n], &msg)
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return msg, nil, err
	}
	return msg, files, nil
}
