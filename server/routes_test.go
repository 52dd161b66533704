package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/srt-mcp/srt-mcp/apikeys"
	"github.com/srt-mcp/srt-mcp/librechat"
	"github.com/srt-mcp/srt-mcp/mcpserver"
	"github.com/srt-mcp/srt-mcp/ops"
	"github.com/srt-mcp/srt-mcp/service"
	"github.com/srt-mcp/srt-mcp/service/servicetest"
)

// testRoutes is routes(o) over a service on a real session registry in a
// temporary state directory, with no warm pool and no sandboxes.
func testRoutes(t *testing.T, o Options) (http.Handler, *service.Service) {
	t.Helper()
	svc := servicetest.New(t, service.Config{})
	m := ops.New()
	m.Bind(svc)
	return routes(&o, svc, mcpserver.New(mcpserver.Config{}, svc), m), svc
}

// do sends one request to h from 10.0.0.1 with Host 127.0.0.1:8080 unless
// header names another; it returns the status and the body.
func do(t *testing.T, h http.Handler, method, target string, header map[string]string) (int, string) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:8080"+target, body)
	r.RemoteAddr = "10.0.0.1:40000"
	for k, v := range header {
		if k == "Host" {
			r.Host = v
		} else {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// every route of the server, with a request the route's own handler would
// serve or refuse by itself.
var everyRoute = []struct{ method, path string }{
	{"POST", "/mcp"},
	{"GET", "/mcp/events"},
	{"GET", "/sse"},
	{"POST", "/message"},
	{"GET", "/files/sess_0123456789ab/a.txt"},
	{"GET", "/metrics"},
	{"GET", "/"},
	{"GET", "/static/index.html"},
	{"GET", "/playground/api/runtimes"},
	{"POST", "/playground/api/run"},
	{"POST", "/playground/api/upload"},
	{"GET", "/playground/api/files"},
	{"POST", "/v1/librechat/exec"},
	{"GET", "/v1/librechat/health"},
	{"GET", "/readyz"},
	{"GET", "/healthz"},
}

const (
	hostRefused      = "forbidden: Host "
	crossSiteRefused = "forbidden: a cross-site browser request"
)

func isProbe(path string) bool { return path == "/readyz" || path == "/healthz" }

// A foreign Host (DNS rebinding) is refused on every route but the probes
// (sent to a pod's IP, revealing nothing).
func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	h, _ := testRoutes(t, Options{LibreChat: &librechat.Config{Prefix: "/v1/librechat", NoAuth: true}})
	for _, rt := range everyRoute {
		code, body := do(t, h, rt.method, rt.path, map[string]string{"Host": "evil.example"})
		refused := code == http.StatusForbidden && strings.Contains(body, hostRefused)
		if refused == isProbe(rt.path) {
			t.Errorf("%s %s with Host evil.example: %d %q; refused by the Host check: %v, want %v", rt.method, rt.path, code, body, refused, !isProbe(rt.path))
		}
	}
	// An allowed host is answered (here: the playground's page).
	h, _ = testRoutes(t, Options{AllowedHosts: []string{"sandbox.example"}})
	if code, body := do(t, h, "GET", "/", map[string]string{"Host": "sandbox.example"}); code != http.StatusOK {
		t.Errorf("GET / with an allowed Host: %d %q", code, body)
	}
}

// A cross-site browser request (an <img> or a form on another site) is
// refused everywhere but on signed downloads and the probes.
func TestCrossSiteRefusedButDownloadsAndProbes(t *testing.T) {
	h, svc := testRoutes(t, Options{LibreChat: &librechat.Config{Prefix: "/v1/librechat", NoAuth: true}})
	crossSite := map[string]string{"Sec-Fetch-Site": "cross-site"}
	for _, rt := range everyRoute {
		code, body := do(t, h, rt.method, rt.path, crossSite)
		refused := code == http.StatusForbidden && strings.Contains(body, crossSiteRefused)
		want := !isProbe(rt.path) && !strings.HasPrefix(rt.path, "/files/")
		if refused != want {
			t.Errorf("%s %s cross-site: %d %q; refused as cross-site: %v, want %v", rt.method, rt.path, code, body, refused, want)
		}
	}
	// A signed link is followed from anywhere.
	c := service.CallerOf("anonymous", "10.0.0.1:1")
	w, _, err := svc.OpenWorkspace(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.WriteFile(c, w, "upload_file", "report.txt", []byte("the report"), false); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(svc.FileURL(w, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, h, "GET", u.RequestURI(), crossSite); code != http.StatusOK || body != "the report" {
		t.Errorf("signed download, cross-site: %d %q", code, body)
	}
	// Same-site requests are served.
	if code, body := do(t, h, "GET", "/playground/api/runtimes", map[string]string{"Sec-Fetch-Site": "same-origin"}); code != http.StatusOK {
		t.Errorf("same-origin playground call: %d %q", code, body)
	}
}

// A foreign Origin is refused like a foreign Host.
func TestForeignOriginRefused(t *testing.T) {
	h, _ := testRoutes(t, Options{AllowedOrigins: []string{"https://chat.example"}})
	if code, body := do(t, h, "POST", "/mcp", map[string]string{"Origin": "https://evil.example"}); code != http.StatusForbidden || !strings.Contains(body, "Origin") {
		t.Errorf("POST /mcp from a foreign Origin: %d %q", code, body)
	}
	if code, body := do(t, h, "GET", "/playground/api/runtimes", map[string]string{"Origin": "https://chat.example"}); code != http.StatusOK {
		t.Errorf("an allowed Origin: %d %q", code, body)
	}
}

// With a token or API keys, MCP, the playground's API and /metrics need
// one; --metrics-token opens /metrics (only); the probes never need one.
func TestAuthentication(t *testing.T) {
	keys, err := apikeys.Parse(strings.NewReader("alice alice-token-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		good string // an Authorization that is accepted everywhere
	}{
		{"token", Options{Token: "the-token-0123456789"}, "Bearer the-token-0123456789"},
		{"keys", Options{Keys: keys}, "Bearer alice-token-0123456789"},
		{"keys+metrics token", Options{Keys: keys, MetricsToken: "scrape-0123456789"}, "Bearer alice-token-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testRoutes(t, tc.o)
			for _, path := range []string{"/mcp", "/mcp/events", "/sse", "/message", "/metrics", "/playground/api/runtimes"} {
				method := "GET"
				if path == "/mcp" || path == "/message" {
					method = "POST"
				}
				for _, authz := range []string{"", "Bearer wrong-token-0123456789"} {
					code, body := do(t, h, method, path, map[string]string{"Authorization": authz})
					if code != http.StatusUnauthorized {
						t.Errorf("%s %s with Authorization %q: %d %q, want 401", method, path, authz, code, body)
					}
				}
			}
			if code, body := do(t, h, "GET", "/metrics", map[string]string{"Authorization": tc.good}); code != http.StatusOK || !strings.Contains(body, "srtmcp_executions_running") {
				t.Errorf("/metrics with a key: %d %.200q", code, body)
			}
			if code, body := do(t, h, "GET", "/playground/api/runtimes", map[string]string{"Authorization": tc.good}); code != http.StatusOK {
				t.Errorf("playground API with a key: %d %q", code, body)
			}
			if tc.o.MetricsToken != "" {
				scrape := map[string]string{"Authorization": "Bearer " + tc.o.MetricsToken}
				if code, body := do(t, h, "GET", "/metrics", scrape); code != http.StatusOK {
					t.Errorf("/metrics with the metrics token: %d %q", code, body)
				}
				if code, _ := do(t, h, "POST", "/mcp", scrape); code != http.StatusUnauthorized {
					t.Errorf("/mcp with the metrics token: %d, want 401", code)
				}
			}
			for _, probe := range []string{"/healthz", "/readyz"} {
				if code, body := do(t, h, "GET", probe, nil); code == http.StatusUnauthorized || code == http.StatusForbidden {
					t.Errorf("%s without a key: %d %q", probe, code, body)
				}
			}
		})
	}
	// No token and no keys (a loopback bind): /metrics is open; with only
	// a metrics token it needs that.
	h, _ := testRoutes(t, Options{})
	if code, _ := do(t, h, "GET", "/metrics", nil); code != http.StatusOK {
		t.Errorf("/metrics, no keys: %d", code)
	}
	h, _ = testRoutes(t, Options{MetricsToken: "scrape-0123456789"})
	if code, _ := do(t, h, "GET", "/metrics", nil); code != http.StatusUnauthorized {
		t.Errorf("/metrics, a metrics token, none sent: %d, want 401", code)
	}
	if code, _ := do(t, h, "GET", "/metrics", map[string]string{"Authorization": "Bearer scrape-0123456789"}); code != http.StatusOK {
		t.Errorf("/metrics, the metrics token sent: %d", code)
	}
}

// The LibreChat Code API is mounted under its prefix (slashes around it
// do not matter), not at all without one; "//" in a path is collapsed
// before routing, so a POST reaches its handler instead of a redirect.
func TestLibreChatMountAndSlashes(t *testing.T) {
	health := func(h http.Handler, path string) bool {
		code, body := do(t, h, "GET", path, nil)
		return code == http.StatusOK && strings.Contains(body, `"status":"ok"`)
	}
	for _, prefix := range []string{"/v1/librechat", "v1/librechat/", "/v1/librechat/"} {
		h, _ := testRoutes(t, Options{LibreChat: &librechat.Config{Prefix: prefix, NoAuth: true}})
		if !health(h, "/v1/librechat/health") {
			t.Errorf("prefix %q: no Code API at /v1/librechat/health", prefix)
		}
		for _, p := range []string{"//v1/librechat/health", "/v1//librechat//health", "/v1/librechat///health"} {
			if !health(h, p) {
				t.Errorf("prefix %q: %s not collapsed onto the Code API", prefix, p)
			}
		}
		// A POST to a doubled slash keeps its method: the Code API's own
		// 404 names it.
		code, body := do(t, h, "POST", "/v1/librechat//no-such-route", nil)
		if code != http.StatusNotFound || !strings.Contains(body, "no such route: POST /no-such-route") {
			t.Errorf("prefix %q: POST /v1/librechat//no-such-route: %d %q", prefix, code, body)
		}
	}
	h, _ := testRoutes(t, Options{LibreChat: &librechat.Config{Prefix: "/codeapi", APIKey: "lc-key-0123456789"}})
	if !health(h, "/codeapi/health") || health(h, "/v1/librechat/health") {
		t.Error("prefix /codeapi: not mounted there alone")
	}
	// The Code API authenticates by itself.
	if code, body := do(t, h, "POST", "/codeapi/exec", nil); code != http.StatusUnauthorized {
		t.Errorf("POST /codeapi/exec without a key: %d %q", code, body)
	}
	for _, lc := range []*librechat.Config{nil, {Prefix: ""}} {
		h, _ := testRoutes(t, Options{LibreChat: lc})
		if health(h, "/v1/librechat/health") {
			t.Errorf("LibreChat %+v: the Code API is served", lc)
		}
	}
}

func TestCollapseSlashes(t *testing.T) {
	var got []string
	h := collapseSlashes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.URL.RawQuery)
	}))
	for _, tc := range []struct{ in, want string }{
		{"/exec", "POST /exec "},
		{"//exec", "POST /exec "},
		{"/a////b/?x=1//2", "POST /a/b/ x=1//2"},
		{"/a/%2F%2Fb", "POST /a/b "},
	} {
		got = nil
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "http://127.0.0.1"+tc.in, nil))
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: handler saw %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The per-caller rate limit keys an MCP request by its Mcp-Session-Id only
// when that is a live session of its principal: a caller that invents an
// id for every request gets no fresh bucket each time.
func TestInventedSessionIDsShareTheCallersLimit(t *testing.T) {
	h, _ := testRoutes(t, Options{RateLimit: 1}) // burst 100
	limited := 0
	for i := 0; i < 150; i++ {
		code, _ := do(t, h, "POST", "/mcp", map[string]string{"Mcp-Session-Id": fmt.Sprintf("invented-%d", i)})
		if code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("150 requests at --rate-limit 1 (burst 100), each with a new invented Mcp-Session-Id: none refused")
	}
}
