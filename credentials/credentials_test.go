package credentials

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/policy"
)

func TestResolveNamesWhatIsMissing(t *testing.T) {
	c := &policy.Credentials{EnvVars: []policy.CredentialEnv{{Name: "SET", Mode: "mask"}, {Name: "UNSET", Mode: "mask"}}}
	env := func(n string) (string, bool) {
		if n == "SET" {
			return "real-value-0123456789", true
		}
		return "", false
	}
	_, err := Resolve(c, []string{"api.example.com"}, env, "/root")
	var e *errs.Error
	if !errors.As(err, &e) || e.Value != "UNSET" || !strings.Contains(e.Message, "UNSET") || e.Field != "credentials.env_vars[1]" {
		t.Fatalf("an unset masked variable must be an error naming it, got %v", err)
	}
	c.EnvVars[1].Mode = "deny"
	ss, err := Resolve(c, []string{"api.example.com"}, env, "/root")
	if err != nil || len(ss) != 1 || ss[0].Value != "real-value-0123456789" || ss[0].InjectHosts[0] != "api.example.com" {
		t.Fatalf("got %v %v", ss, err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", ss[0], ss[0], ss[0], ss); strings.Contains(s, "real-value-0123456789") {
		t.Fatalf("formatting a secret shows its value: %s", s)
	}
}

func TestResolveFileRefusesLink(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tok"), []byte("file-secret-0123456789\n"), 0o600)
	os.Symlink(filepath.Join(dir, "tok"), filepath.Join(dir, "link"))
	c := &policy.Credentials{Files: []policy.CredentialFile{{Path: filepath.Join(dir, "tok"), Mode: "mask"}}}
	ss, err := Resolve(c, nil, os.LookupEnv, "/root")
	if err != nil || ss[0].Value != "file-secret-0123456789" || ss[0].Suffix != "\n" {
		t.Fatal(ss, err)
	}
	c.Files[0].Path = filepath.Join(dir, "link")
	if _, err := Resolve(c, nil, os.LookupEnv, "/root"); err == nil {
		t.Fatal("a masked file that is a symlink must not be followed")
	}
}

func TestMintKeepsLength(t *testing.T) {
	long := strings.Repeat("x", 93)
	if s := Mint(long); len(s) != 93 || !strings.HasPrefix(s, StandinPrefix) {
		t.Errorf("Mint(93 bytes) = %q (%d)", s, len(s))
	}
	if s := Mint("short"); len(s) < 40 || Mint("short") == s {
		t.Errorf("a short value's stand-in keeps 128 random bits: %q", s)
	}
}

func TestInjectRequest(t *testing.T) {
	a := Secret{Name: "A", Value: "real-A-0123456789", InjectHosts: []string{"api.example.com"}}
	b := Secret{Name: "B", Value: "real-B-0123456789", InjectHosts: []string{"other.example.com"}}
	ss := []Secret{a, b}
	MintAll(ss)
	w := NewSwapper(ss)
	r, _ := http.NewRequest("GET", "https://api.example.com/x?key="+ss[0].Standin+"&b="+ss[1].Standin, nil)
	r.Header.Set("Authorization", "Bearer "+ss[0].Standin)
	r.Header.Set("X-Other", ss[1].Standin)
	inj := w.InjectRequest(r, "api.example.com", 443)
	if r.Header.Get("Authorization") != "Bearer real-A-0123456789" {
		t.Errorf("A's stand-in not swapped on A's host: %q", r.Header.Get("Authorization"))
	}
	if r.Header.Get("X-Other") != ss[1].Standin || strings.Contains(r.URL.RawQuery, "real-B") {
		t.Errorf("B's stand-in must stay on A's host")
	}
	if !strings.Contains(r.URL.RawQuery, "key=real-A") || len(inj.Names) != 1 || inj.Names[0] != "A" {
		t.Errorf("query %q names %v", r.URL.RawQuery, inj.Names)
	}
	// Basic: git's credential helper sends user:token base64-encoded.
	r2, _ := http.NewRequest("GET", "https://api.example.com/", nil)
	r2.SetBasicAuth("x-access-token", ss[0].Standin)
	inj = w.InjectRequest(r2, "api.example.com", 443)
	if u, p, _ := r2.BasicAuth(); u != "x-access-token" || p != "real-A-0123456789" {
		t.Errorf("Basic not swapped: %q %q", u, p)
	}
	// The response echoes the header: it must come back as it was sent.
	echo := r2.Header.Get("Authorization") + " " + url.QueryEscape("x") + " real-A-0123456789"
	got, _ := io.ReadAll(NewReader(strings.NewReader(echo), inj.Redact, nil))
	if strings.Contains(string(got), "real-A") || strings.Contains(string(got), strings.TrimPrefix(r2.Header.Get("Authorization"), "Basic ")) {
		t.Errorf("redacted echo still carries the value: %s", got)
	}
	enc := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + ss[0].Standin))
	if !strings.Contains(string(got), enc) {
		t.Errorf("the Basic credential must come back as the sandbox sent it: %s", got)
	}
	// Not A's host: nothing swapped.
	r3, _ := http.NewRequest("GET", "https://evil.example.net/", nil)
	r3.Header.Set("Authorization", "Bearer "+ss[0].Standin)
	if inj := w.InjectRequest(r3, "evil.example.net", 443); len(inj.Names) != 0 || len(inj.Body) != 0 || r3.Header.Get("Authorization") != "Bearer "+ss[0].Standin {
		t.Error("a stand-in sent to a host outside its inject hosts was swapped")
	}
}

func TestSwapReaderAcrossBoundaries(t *testing.T) {
	pairs := []Pair{{Old: []byte("STANDIN-ONE"), New: []byte("real1")}, {Old: []byte("TWO"), New: []byte("second-real")}}
	src := strings.Repeat("aSTANDIN-ONEbTWOc", 5000) + "STANDIN-ON"
	want := strings.ReplaceAll(strings.ReplaceAll(src, "STANDIN-ONE", "real1"), "TWO", "second-real")
	for _, rd := range []io.Reader{strings.NewReader(src), iotest.OneByteReader(strings.NewReader(src)), iotest.HalfReader(strings.NewReader(src))} {
		n := 0
		got, err := io.ReadAll(NewReader(rd, pairs, func(int) { n++ }))
		if err != nil || string(got) != want || n != 10000 {
			t.Fatalf("err=%v equal=%v swaps=%d", err, string(got) == want, n)
		}
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, NewReader(iotest.ErrReader(io.ErrUnexpectedEOF), pairs, nil)); err != io.ErrUnexpectedEOF {
		t.Fatalf("source errors pass through: %v", err)
	}
}

// BenchmarkSwapReader scans a large response for one secret (the proxy
// does this for every response while credentials are masked).
func BenchmarkSwapReader(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	pairs := []Pair{{Old: []byte("ghp_realsecretvalue0123456789abcdefABCDEFGH"), New: []byte("srtmcp_masked_0123456789abcdefghijklmnopqr")}}
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r := NewReader(bytes.NewReader(data), pairs, nil)
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
}
