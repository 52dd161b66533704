package runner

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// The macOS runner's network parts live here, not in run_darwin.go, so that
// they are built and tested on Linux CI as well.

// loopbackListeners opens an execution's HTTP and SOCKS5 proxy listeners,
// in that order, on the host's loopback at ports the kernel picks. A
// seatbelt sandbox has no loopback of its own, so every local user can
// reach these ports: the per-execution token the proxy requires on both
// protocols is what keeps everyone but this sandbox out. They are opened
// before the command starts, so its first connection waits in the backlog
// rather than being refused.
func loopbackListeners() ([]*os.File, []int, error) {
	var files []*os.File
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeFiles(files)
			return nil, nil, err
		}
		f, err := l.(*net.TCPListener).File()
		port := l.Addr().(*net.TCPAddr).Port
		l.Close() // f is a second descriptor of the same socket
		if err != nil {
			closeFiles(files)
			return nil, nil, err
		}
		files, ports = append(files, f), append(ports, port)
	}
	return files, ports, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// seatbeltProxyEnv moves the proxy variables sandboxEnv wrote from the
// fixed in-namespace ports (ProxyHTTPPort, ProxySOCKSPort) to the ports the
// macOS runner really listens on: sandboxEnv is shared with Linux, where
// the sandbox's own loopback lets the ports be fixed. Only the proxy
// variables' values that point at the proxy (user srt on 127.0.0.1 at the
// fixed port) move; any other value, such as a proxy of the caller's own,
// stays as it is.
func seatbeltProxyEnv(env []string, httpPort, socksPort int) []string {
	names := ProxyEnv("")
	out := make([]string, len(env))
	for i, kv := range env {
		out[i] = kv
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := names[k]; !ok {
			continue
		}
		for _, m := range []struct {
			prefix   string
			from, to int
		}{{"http://srt:", ProxyHTTPPort, httpPort}, {"socks5h://srt:", ProxySOCKSPort, socksPort}} {
			at := fmt.Sprintf("@127.0.0.1:%d", m.from)
			if strings.HasPrefix(v, m.prefix) && strings.HasSuffix(v, at) {
				out[i] = fmt.Sprintf("%s=%s@127.0.0.1:%d", k, strings.TrimSuffix(v, at), m.to)
			}
		}
	}
	return out
}
