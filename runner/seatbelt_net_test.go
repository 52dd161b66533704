package runner

import (
	"net"
	"slices"
	"strings"
	"testing"
)

// The macOS runner's environment names the ports it really listens on; the
// rest of sandboxEnv's output, and a proxy the caller set, stay as they are.
func TestSeatbeltProxyEnv(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	env := sandboxEnv(&Spec{Env: map[string]string{"HTTPS_PROXY": "http://corp.example:3128", "X": "@127.0.0.1:3128"}}, token)
	got := seatbeltProxyEnv(env, 50001, 50002)
	if len(got) != len(env) {
		t.Fatalf("%d variables, want %d", len(got), len(env))
	}
	want := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
	for k, v := range ProxyEnv(token) {
		if k != "HTTPS_PROXY" {
			want[k] = strings.NewReplacer("127.0.0.1:3128", "127.0.0.1:50001", "127.0.0.1:1080", "127.0.0.1:50002").Replace(v)
		}
	}
	moved := 0
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		if want[k] != v {
			t.Errorf("%s=%s, want %s", k, v, want[k])
		}
		if strings.Contains(v, "@127.0.0.1:5000") {
			moved++
		}
	}
	if moved != 8 { // the nine proxy URLs but the caller's HTTPS_PROXY
		t.Errorf("%d variables name the real ports, want 8", moved)
	}
	if !slices.Equal(sandboxEnv(&Spec{}, ""), seatbeltProxyEnv(sandboxEnv(&Spec{}, ""), 1, 2)) {
		t.Error("an environment without the proxy changed")
	}
}

func TestSeatbeltLoopbackListeners(t *testing.T) {
	files, ports, err := loopbackListeners()
	if err != nil {
		t.Fatal(err)
	}
	defer closeFiles(files)
	if len(files) != 2 || len(ports) != 2 || ports[0] == ports[1] {
		t.Fatalf("files %v ports %v", files, ports)
	}
	for i, f := range files {
		l, err := net.FileListener(f)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if a := l.Addr().(*net.TCPAddr); !a.IP.Equal(net.IPv4(127, 0, 0, 1)) || a.Port != ports[i] {
			t.Errorf("listener %d on %v, want 127.0.0.1:%d", i, a, ports[i])
		}
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("listener %d: %v", i, err)
		}
		c.Close()
	}
}
