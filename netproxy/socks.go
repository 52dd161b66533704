package netproxy

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"

	socks5 "github.com/things-go/go-socks5"
	"github.com/things-go/go-socks5/statute"
)

// ServeSOCKS serves the SOCKS5 proxy on l until l is closed. Only CONNECT
// is supported. Names are resolved by the proxy, after the decision, so
// socks5h:// clients need no DNS inside the sandbox.
func (p *Proxy) ServeSOCKS(l net.Listener) error {
	if !p.track(l) {
		return net.ErrClosed
	}
	opts := []socks5.Option{
		socks5.WithLogger(socks5.NewLogger(log.New(io.Discard, "", 0))),
		socks5.WithResolver(noResolve{}),
		socks5.WithRule(socksRules{p}),
		socks5.WithDialAndRequest(func(ctx context.Context, _, _ string, _ *socks5.Request) (net.Conn, error) {
			t, ok := ctx.Value(targetKey{}).(target)
			if !ok {
				return nil, errors.New("netproxy: no checked target")
			}
			return p.dial(ctx, t)
		}),
	}
	if p.cfg.Token != "" {
		opts = append(opts, socks5.WithAuthMethods([]socks5.Authenticator{
			socks5.UserPassAuthenticator{Credentials: tokenCredentials{p.cfg.Token}},
		}))
	}
	srv := socks5.NewServer(opts...)
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		release, ok := p.opaqueSlot()
		if !ok {
			c.Close() // too many tunnels open
			continue
		}
		if !p.trackConn(c) {
			release()
			continue
		}
		go func() {
			defer release()
			defer p.untrackConn(c)
			_ = srv.ServeConn(c)
		}()
	}
}

// noResolve leaves names unresolved for the rule set, which resolves after
// deciding and applies the guard.
type noResolve struct{}

func (noResolve) Resolve(ctx context.Context, _ string) (context.Context, net.IP, error) {
	return ctx, nil, nil
}

type socksRules struct{ p *Proxy }

// Allow decides a SOCKS5 request; a refusal makes the library answer
// "connection not allowed by ruleset" (reply 0x02).
func (r socksRules) Allow(ctx context.Context, req *socks5.Request) (context.Context, bool) {
	if req.Command != statute.CommandConnect {
		return ctx, false
	}
	dst := req.RawDestAddr
	host := dst.FQDN
	if host == "" {
		a, ok := netip.AddrFromSlice(dst.IP)
		if !ok {
			return ctx, false
		}
		host = a.Unmap().String()
	}
	t, d := r.p.check(ctx, "socks5", host, dst.Port)
	if !d.Allow {
		return ctx, false
	}
	// A SOCKS tunnel is opaque: refused where the proxy must see in.
	if why := r.p.mustSee(host, dst.Port); why != "" {
		r.p.report(Decision{Protocol: "socks5", Host: reported(host), Port: dst.Port, Rule: why})
		return ctx, false
	}
	return context.WithValue(ctx, targetKey{}, t), true
}

type tokenCredentials struct{ token string }

func (t tokenCredentials) Valid(_, password, _ string) bool {
	return subtle.ConstantTimeCompare([]byte(password), []byte(t.token)) == 1
}
