package dockerbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/moby/moby/client"

	"github.com/srt-mcp/srt-mcp/runner"
)

// proxyListeners opens the run's proxy ports (127.0.0.1:3128 and :1080)
// inside the container's own network namespace, which has nothing but
// loopback (--network none). The sockets belong to this server, which
// serves them with netproxy: the container's only way out goes through the
// allow-list, and its network is never opened. Entering another network
// namespace needs CAP_SYS_ADMIN (a root server).
func (b *Backend) proxyListeners(cid string) (httpL, socksL net.Listener, err error) {
	// A goroutine of its own: if the thread cannot return to our namespace
	// it exits locked, and the runtime discards the thread.
	type res struct {
		h, s net.Listener
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		h, s, err := b.listenIn(cid)
		ch <- res{h, s, err}
	}()
	r := <-ch
	return r.h, r.s, r.err
}

func (b *Backend) listenIn(cid string) (httpL, socksL net.Listener, err error) {
	ctx := context.Background()
	r, err := b.cli.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil || r.Container.State == nil || r.Container.State.Pid == 0 {
		return nil, nil, fmt.Errorf("the session's container is not running: %v", err)
	}
	target, err := os.Open("/proc/" + strconv.Itoa(r.Container.State.Pid) + "/ns/net")
	if err != nil {
		return nil, nil, err
	}
	defer target.Close()
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, err
	}
	defer own.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("entering the container's network namespace needs a root server (%v); run without network.allowed_domains or use --backend native", err)
	}
	httpL, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(runner.ProxyHTTPPort))
	if err == nil {
		socksL, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(runner.ProxySOCKSPort))
		if err != nil {
			httpL.Close()
		}
	}
	if rerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); rerr != nil {
		// This thread is stuck in the container's namespace: let it die
		// with the goroutine (it stays locked) rather than run other code.
		if err == nil {
			httpL.Close()
			socksL.Close()
		}
		return nil, nil, fmt.Errorf("leaving the container's network namespace: %v", rerr)
	}
	runtime.UnlockOSThread()
	return httpL, socksL, err
}
