package netproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
)

type targetKey struct{}

// BlockedHeader marks every refusal so clients and tests can tell the
// proxy's answer from the destination's.
const BlockedHeader = "X-Proxy-Error"

// ServeHTTP serves the HTTP proxy (absolute-form requests and CONNECT) on
// l until l is closed.
func (p *Proxy) ServeHTTP(l net.Listener) error {
	if !p.track(l) {
		return net.ErrClosed
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.Tr = &http.Transport{
		Proxy: nil, // never chain to a proxy from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			t, ok := ctx.Value(targetKey{}).(target)
			if !ok {
				return nil, fmt.Errorf("netproxy: no checked target for %s", addr)
			}
			return p.dial(ctx, t)
		},
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "srt-mcp proxy: send proxy requests (absolute URLs or CONNECT)", http.StatusBadRequest)
	})
	gp.OnRequest().DoFunc(func(req *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		if !p.tokenOK(req.Header.Get("Proxy-Authorization")) {
			return req, authRequired(req)
		}
		req.Header.Del("Proxy-Authorization")
		req.Header.Del("Proxy-Connection")
		host, port, err := splitHostPort(req.URL.Host, defaultPort(req.URL.Scheme))
		if err != nil || req.URL.Host == "" {
			return req, textResponse(req, http.StatusBadRequest, "srt-mcp proxy: bad request target "+strconv.Quote(req.URL.Host)+"\n")
		}
		t, d := p.check(req.Context(), "http", host, port)
		if !d.Allow {
			return req, blocked(req, host, port, d.Rule)
		}
		return req.WithContext(context.WithValue(req.Context(), targetKey{}, t)), nil
	})
	gp.OnRequest().HandleConnectFunc(func(hostport string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		req := ctx.Req
		if !p.tokenOK(req.Header.Get("Proxy-Authorization")) {
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				writeRaw(c, authRequired(req))
				c.Close()
			}}, hostport
		}
		host, port, err := splitHostPort(hostport, 443)
		if err != nil {
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				writeRaw(c, textResponse(req, http.StatusBadRequest, "srt-mcp proxy: bad CONNECT target\n"))
				c.Close()
			}}, hostport
		}
		t, d := p.check(req.Context(), "connect", host, port)
		if !d.Allow {
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				writeRaw(c, blocked(req, host, port, d.Rule))
				c.Close()
			}}, hostport
		}
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			p.tunnel(c, t)
		}}, hostport
	})
	srv := &http.Server{
		Handler:           gp,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.trackConn(c)
			case http.StateClosed, http.StateHijacked:
				p.untrackConn(c)
			}
		},
	}
	return srv.Serve(l)
}

// tunnel answers an allowed CONNECT and copies bytes both ways. On Linux
// the copies between two TCP sockets use splice(2).
func (p *Proxy) tunnel(client net.Conn, t target) {
	if !p.trackConn(client) {
		return
	}
	defer p.untrackConn(client)
	defer client.Close()
	up, err := p.dial(context.Background(), t)
	if err != nil {
		_, _ = io.WriteString(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nsrt-mcp proxy: cannot connect: "+err.Error()+"\n")
		return
	}
	if !p.trackConn(up) {
		return
	}
	defer p.untrackConn(up)
	defer up.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, client)
		closeWrite(up)
	}()
	_, _ = io.Copy(client, up)
	closeWrite(client)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func defaultPort(scheme string) int {
	if strings.EqualFold(scheme, "https") {
		return 443
	}
	return 80
}

func textResponse(req *http.Request, code int, body string) *http.Response {
	return &http.Response{
		StatusCode:    code,
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Connection": {"close"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// blocked is the refusal every HTTP client shows: 403 with the host, the
// port and the rule that decided.
func blocked(req *http.Request, host string, port int, rule string) *http.Response {
	r := textResponse(req, http.StatusForbidden, fmt.Sprintf("srt-mcp: network access to %s:%d is blocked (%s)\n", host, port, rule))
	r.Header.Set(BlockedHeader, "blocked-by-allowlist")
	r.Header.Set("X-Srt-Mcp-Rule", rule)
	return r
}

func authRequired(req *http.Request) *http.Response {
	r := textResponse(req, http.StatusProxyAuthRequired, "srt-mcp proxy: this execution's proxy token is required\n")
	r.Header.Set("Proxy-Authenticate", `Basic realm="srt-mcp"`)
	return r
}

func writeRaw(c net.Conn, r *http.Response) {
	var b bytes.Buffer
	_ = r.Write(&b)
	_, _ = c.Write(b.Bytes())
}
