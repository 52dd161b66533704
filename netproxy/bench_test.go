package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
)

// blobServer serves n bytes of zeros over plain HTTP on loopback.
func blobServer(b *testing.B, n int64) (string, func()) {
	buf := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(n))
		for left := n; left > 0; {
			k := int64(len(buf))
			if left < k {
				k = left
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			left -= k
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }
}

// fetch downloads url over conn (already tunnelled, or direct) with a
// minimal HTTP/1.1 exchange and returns the body size.
func fetch(b *testing.B, c net.Conn, host string) int64 {
	fmt.Fprintf(c, "GET /blob HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	br := bufio.NewReaderSize(c, 1<<20)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func connectThrough(b *testing.B, proxyAddr, token, target string) net.Conn {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	auth := "Basic " + basicAuth("srt", token)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, auth)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		b.Fatalf("CONNECT: %q %v", line, err)
	}
	for {
		l, _ := br.ReadString('\n')
		if l == "\r\n" || l == "" {
			break
		}
	}
	if br.Buffered() > 0 {
		b.Fatal("unexpected bytes after CONNECT reply")
	}
	return c
}

// BenchmarkDownload200MB compares a 200 MB download over loopback, direct
// and through a CONNECT tunnel of the proxy, in one run. Goal: the tunnel
// keeps at least 0.8x of direct throughput. Read MB/s from -bench output.
func BenchmarkDownload200MB(b *testing.B) {
	const size = 200 << 20
	addr, stop := blobServer(b, size)
	defer stop()
	h := newBenchProxy(b, addr)
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			if n := fetch(b, c, addr); n != size {
				b.Fatalf("got %d bytes", n)
			}
			c.Close()
		}
	})
	b.Run("connect", func(b *testing.B) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			c := connectThrough(b, h.addr, h.token, addr)
			if n := fetch(b, c, addr); n != size {
				b.Fatalf("got %d bytes", n)
			}
			c.Close()
		}
	})
}

// BenchmarkSmallRequest measures the latency a proxied small request adds
// (new connection each time, as a short-lived tool would do).
func BenchmarkSmallRequest(b *testing.B) {
	addr, stop := blobServer(b, 100)
	defer stop()
	h := newBenchProxy(b, addr)
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			fetch(b, c, addr)
			c.Close()
		}
	})
	b.Run("connect", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c := connectThrough(b, h.addr, h.token, addr)
			fetch(b, c, addr)
			c.Close()
		}
	})
}

type benchProxy struct {
	addr, token string
}

func newBenchProxy(b *testing.B, upstream string) benchProxy {
	dec, err := policy.NewDecider(policy.Network{AllowedDomains: []string{upstream}})
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(Config{Decider: dec, Token: "bench", DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.ServeHTTP(l)
	b.Cleanup(func() { p.Close() })
	return benchProxy{addr: l.Addr().String(), token: "bench"}
}
