package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestPct(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3} // unsorted on purpose
	for _, tc := range []struct {
		p    float64
		want float64
	}{
		{0, 1}, {0.5, 3}, {0.9, 5}, {0.99, 5}, {1, 5},
		{0.25, 2}, // rank 0.25*4 = 1
		{0.74, 4}, // rank 2.96 rounds to 3
		{0.12, 1}, // rank 0.48 rounds to 0
		{0.13, 2}, // rank 0.52 rounds to 1
	} {
		if got := pct(xs, tc.p); got != tc.want {
			t.Errorf("pct(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	if !slices.Equal(xs, []float64{5, 1, 4, 2, 3}) {
		t.Errorf("pct sorted its argument in place: %v", xs)
	}
	if got := pct(nil, 0.5); got != 0 {
		t.Errorf("pct(nil) = %v, want 0", got)
	}
	if got := median([]float64{10, 30, 20, 40}); got != 30 {
		t.Errorf("median of four = %v, want 30 (the upper middle: rank 1.5 rounds up)", got)
	}
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want Mode
	}{
		{nil, Exec},
		{[]string{"mcp"}, MCP},
		{[]string{"data"}, Data},
		{[]string{"docker"}, Docker},
		// --docker with --workspace is the workspace part on the Docker backend.
		{[]string{"docker", "workspace"}, Workspace},
		{[]string{"load", "net", "mcp"}, Load},
		{[]string{"tls", "workspace"}, TLS},
		{[]string{"mcp", "all"}, All},
		{[]string{"cold", "load"}, Cold},
		{[]string{"json", "rounds"}, Exec}, // not parts
	} {
		got := Select(func(name string) bool { return slices.Contains(tc.set, name) })
		if got != tc.want {
			t.Errorf("Select(%v) = %q, want %q", tc.set, got, tc.want)
		}
	}
}

func TestRunUnknownMode(t *testing.T) {
	if err := Run("nonsense", Options{}); err == nil || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Fatalf("Run(nonsense) = %v", err)
	}
}

// A bench failure ends srt-mcp with status 1, as cli.Exit(msg, 1) did:
// main finds it through urfave/cli's ExitCoder interface.
func TestFailExitCode(t *testing.T) {
	var ec interface {
		error
		ExitCode() int
	}
	err := fail("bench needs bwrap")
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || ec.Error() != "bench needs bwrap" {
		t.Fatalf("fail: %#v", err)
	}
}

func TestSuiteAddOnlyWithSummary(t *testing.T) {
	s := &suite{}
	s.add(Row{Path: "dropped"}) // a part run alone: no summary, no panic
	rows := []Row{}
	s.summary = &rows
	s.add(Row{Path: "kept"})
	if len(rows) != 1 || rows[0].Path != "kept" {
		t.Fatalf("rows = %v", rows)
	}
}

func TestWriteSummary(t *testing.T) {
	var b bytes.Buffer
	writeSummary(&b, []Row{
		{Path: "exec", Now: "10.0 ms", Anchor: "9.0 ms", Ratio: "1.11x", Goal: "<= 1.3x", Met: true},
		{Path: "mcp", Now: "20.0 ms", Anchor: "9.0 ms", Ratio: "2.22x", Goal: "<= 1.5x"},
		{Path: "load: not measured (no node)"},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"path", "srt-mcp", "anchor", "ratio", "goal"},
		{"exec", "10.0 ms", "9.0 ms", "1.11x", "<= 1.3x", "met"},
		{"mcp", "20.0 ms", "2.22x", "<= 1.5x", "missed"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(lines[3], "met") || strings.Contains(lines[3], "missed") {
		t.Errorf("a row without a goal is neither met nor missed: %q", lines[3])
	}
	// The columns line up: every ratio starts where the header's does.
	col := strings.Index(lines[0], "ratio") + len("ratio")
	for _, l := range lines[1:3] {
		if got := strings.Index(l, "x ") + 1; got != col {
			t.Errorf("ratio column ends at %d, header's at %d: %q", got, col, l)
		}
	}
}

func TestExecTable(t *testing.T) {
	var b bytes.Buffer
	s := &suite{Options: Options{Out: &b, Rounds: 3, Against: "/old/srt-mcp"}}
	s.execTable([]*execCase{
		{name: "bare python3 -c 1", ms: []float64{5, 5, 5}},
		{name: "minimal bwrap", ms: []float64{10, 10, 10}},
		{name: "srt-mcp exec", ms: []float64{12, 13, 11}},
		{name: "--against exec", ms: []float64{24, 26, 22}},
	})
	out := b.String()
	for _, want := range []string{
		"bare python3 -c 1        5.00ms   5.00ms   5.00ms      0.50x",
		"srt-mcp exec            12.00ms  13.00ms  11.00ms      1.20x",
		"this build vs --against /old/srt-mcp: 0.500x (median), 0.500x (p90)",
		"rounds: 3 (interleaved)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestParseCurl(t *testing.T) {
	v, err := parseCurl([]byte("104857600.000 2.000500\n"), nil)
	if err != nil || !reflect.DeepEqual(v, []float64{104857600, 2.0005}) {
		t.Fatalf("parseCurl = %v, %v", v, err)
	}
	if _, err := parseCurl([]byte("1 2 3"), nil); err == nil || !strings.Contains(err.Error(), `"1 2 3"`) {
		t.Errorf("three fields: %v", err)
	}
	if _, err := parseCurl([]byte("curl: (7) refused"), errors.New("exit status 7")); err == nil ||
		!strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("curl's error: %v", err)
	}
}

func TestCurlTimes(t *testing.T) {
	ts, err := curlTimes([]byte("1 0.004\n0 0.000120\n0 0.000110\n"), nil)
	if err != nil || !reflect.DeepEqual(ts, [][2]float64{{1, 0.004}, {0, 0.00012}, {0, 0.00011}}) {
		t.Fatalf("curlTimes = %v, %v", ts, err)
	}
	if err := checkConnects(ts, 0); err != nil {
		t.Errorf("kept alive: %v", err)
	}
	if err := checkConnects(ts, 1); err == nil || !strings.Contains(err.Error(), "transfer 2 of 3 made 0 connections, want 1") {
		t.Errorf("new connections wanted: %v", err)
	}
	if _, err := curlTimes([]byte("1 0.004\n"), nil); err == nil {
		t.Error("one transfer: nothing left once the first is skipped")
	}
	if _, err := curlTimes(nil, errors.New("exit status 7")); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("the command's error: %v", err)
	}
	if err := pipSaved([]byte("Saved ./a.whl\nSaved ./b.whl\n"), nil, 2); err != nil {
		t.Error(err)
	}
	if err := pipSaved([]byte("Saved ./a.whl\n"), nil, 2); err == nil {
		t.Error("pip saved 1 of 2 files")
	}
}

func TestLoadFailures(t *testing.T) {
	ok := loadReport{Clients: 50, RSSBefore: 200 << 20, RSSAfter: 300 << 20, FDsBefore: 20, FDsAfter: 20,
		ProcsBefore: 8, ProcsAfter: 8, GorBefore: 40, GorAfter: 42}
	if f := loadFailures(ok); len(f) != 0 {
		t.Errorf("at the limits (100 MB, +2 goroutines): %v", f)
	}
	bad := ok
	bad.Errors, bad.RSSAfter, bad.GorAfter = 3, 301<<20, 43
	f := loadFailures(bad)
	want := []string{"3 errors", "RSS grew 101 MB (more than 100 MB)", "left over: fds 20 -> 20, processes 8 -> 8, goroutines 40 -> 43"}
	if !slices.Equal(f, want) {
		t.Errorf("loadFailures = %q, want %q", f, want)
	}
	for _, mod := range []func(*loadReport){
		func(r *loadReport) { r.FDsAfter++ },
		func(r *loadReport) { r.ProcsAfter++ },
	} {
		r := ok
		mod(&r)
		if len(loadFailures(r)) != 1 {
			t.Errorf("%+v: want one failure", r)
		}
	}
}

func TestLoadRowGoal(t *testing.T) {
	for _, tc := range []struct {
		r   loadReport
		met bool
	}{
		{loadReport{Clients: 50, Seconds: 60, P99MS: 149, Throughput: 800, ClientCPUS: 42}, true},
		{loadReport{Clients: 50, Seconds: 60, P99MS: 150, Throughput: 900, ClientCPUS: 42}, false},
		{loadReport{Clients: 50, Seconds: 60, P99MS: 20, Throughput: 799, ClientCPUS: 42}, false},
		{loadReport{Clients: 50, Seconds: 60, P99MS: 20, Throughput: 900, Errors: 1, ClientCPUS: 42}, false},
	} {
		row := loadRow(tc.r)
		if row.Met != tc.met {
			t.Errorf("%+v: met %v, want %v", tc.r, row.Met, tc.met)
		}
		if want := fmt.Sprintf("50 TS SDK clients, warm cells, 60 s: p99, calls/s (clients' CPU %.0f%%)", 100*42/60/float64(runtime.NumCPU())); row.Path != want {
			t.Errorf("path %q", row.Path)
		}
	}
}

func TestWriteLoadReport(t *testing.T) {
	var b bytes.Buffer
	writeLoadReport(&b, loadReport{Calls: 1234, Throughput: 20.56, P99MS: 99.94, RSSBefore: 100 << 20, RSSAfter: 120 << 20,
		RSSPeak: 150 << 20, Samples: []string{"timeout"}})
	for _, want := range []string{
		"calls                          1234\n",
		"throughput (calls/s)           20.6\n",
		"p99 (ms)                       99.9\n",
		"RSS (MB)                        100          120   (peak 150 MB)\n",
		"error: timeout\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

func TestParseLoadReport(t *testing.T) {
	r, err := parseLoadReport(`{"clients":10,"calls":500,"errors":1,"error_samples":["boom"],"p99_ms":12.5,"throughput_per_s":50}`)
	if err != nil || r.Clients != 10 || r.Calls != 500 || r.P99MS != 12.5 || r.Throughput != 50 || !slices.Equal(r.Samples, []string{"boom"}) {
		t.Fatalf("parseLoadReport = %+v, %v", r, err)
	}
	for _, last := range []string{"", "Error: cannot find module", `{"calls":5}`} {
		if _, err := parseLoadReport(last); err == nil {
			t.Errorf("%q: want an error", last)
		}
	}
}

func TestParseStatusMemory(t *testing.T) {
	rss, peak := parseStatusMemory([]byte("Name:\tsrt-mcp\nVmHWM:\t   2048 kB\nVmRSS:\t   1024 kB\nThreads:\t9\n"))
	if rss != 1024<<10 || peak != 2048<<10 {
		t.Fatalf("rss %d peak %d", rss, peak)
	}
	if rss, peak := parseStatusMemory(nil); rss != 0 || peak != 0 {
		t.Fatalf("empty: %d %d", rss, peak)
	}
}

func TestParseGoroutines(t *testing.T) {
	m := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 37\ngo_goroutines_total 1\n"
	if n := parseGoroutines([]byte(m)); n != 37 {
		t.Fatalf("parseGoroutines = %d", n)
	}
	if n := parseGoroutines([]byte("go_threads 9\n")); n != 0 {
		t.Fatalf("absent: %d", n)
	}
}

func TestParentOf(t *testing.T) {
	for _, tc := range []struct {
		stat string
		ppid int
		ok   bool
	}{
		{"1234 (python3) S 99 1234 1234 0 -1", 99, true},
		{"1234 (a) b) (c) R 77 1 1", 77, true}, // comm with spaces and parentheses
		{"1234 no comm", 0, false},
		{"1234 (x)", 0, false},
	} {
		ppid, ok := parentOf([]byte(tc.stat))
		if ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parentOf(%q) = %d, %v; want %d, %v", tc.stat, ppid, ok, tc.ppid, tc.ok)
		}
	}
}

func TestDescendantsIn(t *testing.T) {
	// 10 is the server: 11 and 12 its runners, 13 under 12, 14 under 13;
	// 20 is someone else's.
	parent := map[int]int{1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 14: 13, 20: 1, 21: 20}
	got := descendantsIn(parent, 10)
	slices.Sort(got)
	if !slices.Equal(got, []int{11, 12, 13, 14}) {
		t.Fatalf("descendantsIn = %v", got)
	}
	if got := descendantsIn(parent, 14); len(got) != 0 {
		t.Fatalf("a leaf has none: %v", got)
	}
}

func TestParsePss(t *testing.T) {
	in := "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:   4096 kB\nPss:   1536 kB\nPss_Anon: 512 kB\n"
	if got := parsePss(strings.NewReader(in)); got != 1536<<10 {
		t.Fatalf("parsePss = %d", got)
	}
	if got := parsePss(strings.NewReader("Rss: 1 kB\n")); got != 0 {
		t.Fatalf("no Pss: %d", got)
	}
}

func TestClientDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SRT_MCP_CLIENTS", "")
	if got, err := clientDir(dir, "--load"); err != nil || got != dir {
		t.Fatalf("given: %q %v", got, err)
	}
	t.Setenv("SRT_MCP_CLIENTS", dir)
	if got, err := clientDir("", "--load"); err != nil || got != dir {
		t.Fatalf("from $SRT_MCP_CLIENTS: %q %v", got, err)
	}
	t.Chdir(filepath.Dir(dir))
	if got, err := clientDir(filepath.Base(dir), "--load"); err != nil || got != dir {
		t.Fatalf("relative: %q %v, want %q", got, err, dir)
	}
	empty := t.TempDir()
	_, err := clientDir(empty, "--cold")
	var ec interface{ ExitCode() int }
	if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 1 ||
		err.Error() != "bench --cold drives the MCP TypeScript SDK from "+empty+"/node_modules: run make clients (npm ci in integration/mcpclient), or give --client-dir" {
		t.Fatalf("no SDK: %v", err)
	}
}
