package settings

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
)

// serveFlags stands for the long names of serve's flags.
var serveFlags = []string{"allow-domain", "deny-domain", "max-timeout", "drain-timeout", "insecure-no-auth", "max-memory", "warm-pool", "config", "settings"}

func TestParseValid(t *testing.T) {
	data := `{"allow-domain": ["pypi.org", "files.pythonhosted.org"], "max-timeout": 600,
		"drain-timeout": "20s", "insecure-no-auth": false, "max-memory": 1.5e3,
		"filesystem": {"denyWrite": ["~/.ssh"]}, "network": {"allowedDomains": ["example.com"]}}`
	f, err := Parse("/etc/srt-mcp.json", []byte(data), serveFlags)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"allow-domain":     {"pypi.org", "files.pythonhosted.org"},
		"max-timeout":      {"600"},   // a number as written, not as float64 prints it
		"drain-timeout":    {"20s"},   // a string as is
		"insecure-no-auth": {"false"}, // a boolean
		"max-memory":       {"1.5e3"},
	}
	if !reflect.DeepEqual(f.Flags, want) {
		t.Errorf("Flags = %v, want %v", f.Flags, want)
	}
	if f.Path != "/etc/srt-mcp.json" {
		t.Errorf("Path = %q", f.Path)
	}
	if f.Policy == nil {
		t.Fatal("network and filesystem gave no Policy")
	}
	if !slices.Equal(f.Policy.Filesystem.DenyWrite, []string{"~/.ssh"}) || !slices.Equal(f.Policy.Network.AllowedDomains, []string{"example.com"}) {
		t.Errorf("Policy = %+v", *f.Policy)
	}
}

func TestParseWithoutSRTKeys(t *testing.T) {
	f, err := Parse("s.json", []byte(`{"warm-pool": 0}`), serveFlags)
	if err != nil {
		t.Fatal(err)
	}
	if f.Policy != nil {
		t.Errorf("no network or filesystem key: Policy = %+v, want nil", f.Policy)
	}
	if f, err := Parse("s.json", []byte(" {} \n"), serveFlags); err != nil || len(f.Flags) != 0 {
		t.Errorf("an empty object: %v %v", f, err)
	}
}

func TestParseRefused(t *testing.T) {
	for _, tc := range []struct {
		name, data, err string
	}{
		{"unknown key", `{"max-timeout": 5, "allow-domains": ["x.org"]}`,
			`s.json: unknown key "allow-domains": use the long name of a srt-mcp serve flag (for example "allow-domain" or "max-timeout"), or srt's "network" and "filesystem"`},
		{"config key", `{"config": "/etc/other.json"}`,
			`s.json: a settings file cannot name another (key "config")`},
		{"object value", `{"max-timeout": {"seconds": 5}}`,
			`s.json: "max-timeout": want a string, number, boolean or a list of them, got {"seconds": 5}`},
		{"null value", `{"max-timeout": null}`,
			`s.json: "max-timeout": want a string, number, boolean or a list of them, got null`},
		{"list of objects", `{"allow-domain": ["a.org", {"b": 1}]}`,
			`s.json: "allow-domain": want a string, number, boolean or a list of them, got ["a.org", {"b": 1}]`},
		{"nested list", `{"allow-domain": [["a.org"]]}`,
			`s.json: "allow-domain": want a string, number, boolean or a list of them, got [["a.org"]]`},
		{"two values", `{"max-timeout": 5} {"max-timeout": 6}`,
			`s.json holds more than one JSON value`},
		{"not an object", `["max-timeout", 5]`,
			`s.json is not one JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage`},
		{"null", `null`,
			`s.json is not one JSON object: <nil>`},
		{"empty", ``,
			`s.json is not one JSON object: EOF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("s.json", []byte(tc.data), serveFlags)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("Parse(%s) = %v, %v\nwant error %s", tc.data, f, err, tc.err)
			}
		})
	}
}

// srt's keys are parsed as an srt settings file: its errors, prefixed
// with the path.
func TestParseSRTKeysThroughPolicy(t *testing.T) {
	data := `{"network": {"allowedDomains": "pypi.org"}}` // a string, not a list
	_, err := Parse("s.json", []byte(data), serveFlags)
	if err == nil || !strings.HasPrefix(err.Error(), "s.json: ") {
		t.Fatalf("Parse = %v", err)
	}
	_, want := policy.ParseSettings([]byte(data))
	if want == nil || err.Error() != "s.json: "+want.Error() {
		t.Errorf("error %q, want policy.ParseSettings's %q", err, want)
	}
	if _, err := Parse("s.json", []byte(`{"network": {"allowedDomain": []}}`), serveFlags); err == nil {
		t.Error("an unknown srt network key was accepted")
	}
}

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{`"x"`, []string{"x"}},
		{`12`, []string{"12"}},
		{`0.25`, []string{"0.25"}},
		{`true`, []string{"true"}},
		{`[]`, []string{}},
		{`["a", 2, false]`, []string{"a", "2", "false"}},
	} {
		got, err := Values([]byte(tc.raw))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Values(%s) = %#v, %v; want %#v", tc.raw, got, err, tc.want)
		}
	}
}

func TestApply(t *testing.T) {
	f, err := Parse("s.json", []byte(`{"max-timeout": 600, "allow-domain": ["a.org", "b.org"], "warm-pool": 1}`), serveFlags)
	if err != nil {
		t.Fatal(err)
	}
	var set [][2]string
	err = f.Apply(func(name string) bool { return name == "warm-pool" }, // the command line set it: it wins
		func(name, value string) error { set = append(set, [2]string{name, value}); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"allow-domain", "a.org"}, {"allow-domain", "b.org"}, {"max-timeout", "600"}}
	if !reflect.DeepEqual(set, want) {
		t.Errorf("set %v, want %v (name order, the command line's flag left alone)", set, want)
	}
	err = f.Apply(func(string) bool { return false }, func(name, value string) error {
		if name == "max-timeout" {
			return errors.New(`invalid value "600"`)
		}
		return nil
	})
	if err == nil || err.Error() != `s.json: "max-timeout": invalid value "600"` {
		t.Errorf("a refused value: %v", err)
	}
	var none *File
	if err := none.Apply(nil, nil); err != nil {
		t.Errorf("nil File: %v", err)
	}
}

func TestChangedKeys(t *testing.T) {
	a := &File{Flags: map[string][]string{"max-timeout": {"600"}, "allow-domain": {"a.org", "b.org"}, "warm-pool": {"2"}, "drain-timeout": {"5s"}}}
	b := &File{Flags: map[string][]string{"max-timeout": {"600"}, "allow-domain": {"b.org", "a.org"}, "deny-domain": {"c.org"}, "drain-timeout": {"5s"}}}
	// allow-domain: reordered; deny-domain: added; warm-pool: removed.
	if got := ChangedKeys(a, b); !slices.Equal(got, []string{"allow-domain", "deny-domain", "warm-pool"}) {
		t.Errorf("ChangedKeys = %v", got)
	}
	if got := ChangedKeys(a, a); len(got) != 0 {
		t.Errorf("the same reading: %v", got)
	}
}

func TestIsCeilingKey(t *testing.T) {
	for k, want := range map[string]bool{"allow-domain": true, "max-output": true, "settings": true, "warm-pool": false, "port": false} {
		if IsCeilingKey(k) != want {
			t.Errorf("IsCeilingKey(%q) = %v", k, !want)
		}
	}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestReadChecksTheFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	writeFile(t, p, `{"max-timeout": 60}`, 0o600)
	f, err := Read(p, serveFlags)
	if err != nil || !slices.Equal(f.Flags["max-timeout"], []string{"60"}) {
		t.Fatalf("Read = %+v, %v", f, err)
	}
	writeFile(t, p, `{"max-timeout": 60}`, 0o620)
	if _, err := Read(p, serveFlags); err == nil || !strings.Contains(err.Error(), "may be written by others") {
		t.Errorf("a group-writable file: %v", err)
	}
	if _, err := Read(dir, serveFlags); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	writeFile(t, p, `{"x": "`+strings.Repeat("a", MaxBytes)+`"}`, 0o600)
	if _, err := Read(p, serveFlags); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file past MaxBytes: %v", err)
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	writeFile(t, p, `{"allow-domain": ["a.org"], "warm-pool": 2}`, 0o600)
	f, err := Read(p, serveFlags)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var applied [][]string
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	ceiling := func(next *File) (policy.Policy, error) {
		if slices.Contains(next.Flags["allow-domain"], "refused.org") {
			return policy.Policy{}, errors.New("the ceiling refuses it")
		}
		var p policy.Policy
		p.Network.AllowedDomains = next.Flags["allow-domain"]
		return p, nil
	}
	apply := func(p policy.Policy) {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, p.Network.AllowedDomains)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Watch(ctx, f, serveFlags, logger, ceiling, apply); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: applied %v, log:\n%s", what, applied, logs.String())
	}
	// A change: applied, and a key a reload cannot apply is named.
	writeFile(t, p, `{"allow-domain": ["b.org"], "warm-pool": 3}`, 0o600)
	waitFor("a changed file", func() bool { return len(applied) == 1 && slices.Equal(applied[0], []string{"b.org"}) })
	waitFor("the warning", func() bool {
		return strings.Contains(logs.String(), "takes effect at the next start") && strings.Contains(logs.String(), "key=warm-pool")
	})
	// A file that does not parse, and one whose ceiling fails: refused, logged.
	writeFile(t, p, `{"allow-domain": `, 0o600)
	waitFor("a broken file", func() bool { return strings.Count(logs.String(), "settings file refused") == 1 })
	writeFile(t, p, `{"allow-domain": ["refused.org"]}`, 0o600)
	waitFor("a refused ceiling", func() bool { return strings.Count(logs.String(), "the ceiling refuses it") == 1 })
	// The same bytes as the reading in force again: no reload.
	writeFile(t, p, `{"allow-domain": ["b.org"], "warm-pool": 3}`, 0o600)
	time.Sleep(4 * settleDelay)
	mu.Lock()
	if len(applied) != 1 || strings.Count(logs.String(), "settings file reloaded") != 1 {
		t.Errorf("the same bytes were reloaded: applied %v, log:\n%s", applied, logs.String())
	}
	mu.Unlock()
	// And a change after all that is applied.
	writeFile(t, p, `{"allow-domain": ["c.org"], "warm-pool": 3}`, 0o600)
	waitFor("the next change", func() bool { return len(applied) == 2 && slices.Equal(applied[1], []string{"c.org"}) })
	// The watch ends with ctx.
	cancel()
	time.Sleep(2 * settleDelay)
	writeFile(t, p, `{"allow-domain": ["d.org"]}`, 0o600)
	time.Sleep(4 * settleDelay)
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 2 {
		t.Errorf("applied after ctx ended: %v", applied)
	}
}

// lockedWriter lets the test read the log while the watcher writes it.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
