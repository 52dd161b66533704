package bench

// Costs: what srt-mcp costs a model per turn, in bytes and tokens, beside
// its peers. Hosts that do not defer tools send the whole tools/list with
// every model request, and every reply enters the context; so the table
// weighs the catalogue per --tools profile and the replies of typical
// calls, as each kind of host shows them to the model: most show
// content[0].text, Claude Code shows structuredContent.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// catalogueCost is what one server's tools/list weighs.
type catalogueCost struct {
	Server, Profile string
	Tools, Bytes    int
	Tokens          int
	Note            string // "not measured: why", when it is not
	listing         string // what the tokenizer counts
}

// replyCost is what one tool reply weighs.
type replyCost struct {
	Server, Call string
	// Text is content[0].text's bytes (what most hosts show the model),
	// Structured the compact JSON of structuredContent (what Claude Code
	// shows; 0: none), Result the whole JSON-RPC result.
	Text, Structured, Result     int
	TextTokens, StructuredTokens int
	// Extra names the content blocks after the first (image previews,
	// resource links); Note says the reply was cut, or why it was not
	// measured.
	Extra, Note string
	measured    bool
	text, sc    string // what the tokenizer counts
}

// costTable is the output of bench --costs.
type costTable struct {
	Tokenizer  string // how tokens were counted
	Catalogues []catalogueCost
	Replies    []replyCost
}

// costCall is a typical call whose reply the table weighs.
type costCall struct {
	label, tool string
	args        map[string]any
}

// plotPNG is run_python making a chart: the reply carries the artifact's
// link and a small preview image.
const plotPNG = `import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("chart.png")
print("saved chart.png")`

// typicalCalls are the calls of the cost table, py the interpreter.
func typicalCalls(py string) []costCall {
	return []costCall{
		{"execute_code `echo hello`", "execute_code", map[string]any{"command": "echo hello"}},
		{"execute_code `python3 -c \"print(sum(range(100)))\"`", "execute_code", map[string]any{"command": py + ` -c "print(sum(range(100)))"`}},
		{"execute_code code `1+1`, language python", "execute_code", map[string]any{"code": "1+1", "language": "python"}},
		{"execute_code 200 KB stdout", "execute_code", map[string]any{"command": `head -c 200000 /dev/zero | tr '\0' x`}},
		{"run_python matplotlib PNG", "run_python", map[string]any{"code": plotPNG}},
		{"sandbox_run_code python print", "sandbox_run_code", map[string]any{"conversationId": "bench-costs", "language": "python", "code": `print("hello")`}},
	}
}

// costProfiles are the --tools values whose catalogue is weighed.
var costProfiles = []string{"all", "exec", "data", "workspace", "runcode", "execute_code"}

// costs measures srt-mcp's catalogue per profile and its replies to the
// typical calls, then its peers' (mcp-run-python, E2B's MCP server), and
// prints the tables.
func (s *suite) costs() error {
	var t costTable
	for _, profile := range costProfiles {
		b, err := startServer(s.Binary, "--tools", profile)
		if err != nil {
			return fail(err.Error())
		}
		c, err := listCost(b.rpcRaw)
		if err == nil && profile == "all" {
			for _, call := range typicalCalls(s.Python) {
				r := replyCost{Server: "srt-mcp", Call: call.label}
				raw, err := b.rpcRaw("tools/call", map[string]any{"name": call.tool, "arguments": call.args})
				if err == nil {
					r, err = measureReply(r, raw)
				}
				if err != nil {
					b.stop()
					return fail(fmt.Sprintf("%s: %v", call.label, err))
				}
				t.Replies = append(t.Replies, r)
			}
		}
		b.stop()
		if err != nil {
			return fail(fmt.Sprintf("tools/list --tools %s: %v", profile, err))
		}
		c.Server, c.Profile = "srt-mcp", "--tools "+profile
		t.Catalogues = append(t.Catalogues, c)
	}
	peersDir := s.peersDir()
	for _, p := range s.peers(peersDir) {
		c, r := p.measure()
		t.Catalogues, t.Replies = append(t.Catalogues, c), append(t.Replies, r)
	}
	t.count(peersDir)
	s.writeCosts(t)
	s.addCostRows(t)
	return nil
}

// listCost weighs a tools/list result got through rpc.
func listCost(rpc func(string, any) (json.RawMessage, error)) (catalogueCost, error) {
	raw, err := rpc("tools/list", map[string]any{})
	if err != nil {
		return catalogueCost{}, err
	}
	var v struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return catalogueCost{}, fmt.Errorf("tools/list: %v", err)
	}
	return catalogueCost{Tools: len(v.Tools), Bytes: len(raw), listing: string(raw)}, nil
}

// measureReply weighs a tools/call result into r. A tool error is an
// error: the table weighs answers, not failures.
func measureReply(r replyCost, raw json.RawMessage) (replyCost, error) {
	var v struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			Data string `json:"data"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return r, fmt.Errorf("bad tools/call result: %v", err)
	}
	if len(v.Content) > 0 && v.Content[0].Type == "text" {
		r.text = v.Content[0].Text
	}
	if v.IsError {
		return r, fmt.Errorf("the tool failed: %s", firstErrorLine(r.text))
	}
	r.Text, r.Result, r.measured = len(r.text), len(raw), true
	if len(v.StructuredContent) > 0 && string(v.StructuredContent) != "null" {
		var compact bytes.Buffer
		if err := json.Compact(&compact, v.StructuredContent); err != nil {
			return r, err
		}
		r.sc, r.Structured = compact.String(), compact.Len()
		var sc struct {
			Cut     string `json:"cut"`
			NextSeq *int   `json:"next_seq"`
		}
		if json.Unmarshal(v.StructuredContent, &sc) == nil && sc.Cut != "" {
			r.Note = "cut: reads on with get_execution_output"
			if sc.NextSeq != nil {
				r.Note += " since_seq=" + strconv.Itoa(*sc.NextSeq)
			}
		}
	}
	var extra []string
	for _, c := range v.Content[min(1, len(v.Content)):] {
		switch c.Type {
		case "image":
			extra = append(extra, fmt.Sprintf("image (%s B base64)", thousands(len(c.Data))))
		default:
			extra = append(extra, c.Type)
		}
	}
	r.Extra = strings.Join(extra, ", ")
	return r, nil
}

// firstErrorLine is the line of a failure's text that names the error
// (a traceback's last word is its exception), else its first line, cut
// to 120 characters.
func firstErrorLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	line := lines[0]
	for _, l := range lines {
		if strings.Contains(l, "Error:") {
			line = l
			break
		}
	}
	line = strings.TrimSpace(line)
	if len(line) > 120 {
		line = line[:117] + "..."
	}
	return line
}

// peersDir is where the peers are installed (bench/peers/package.json):
// --peers-dir, else $SRT_MCP_PEERS, else bench/peers.
func (s *suite) peersDir() string {
	dir := s.Options.PeersDir
	if dir == "" {
		dir = os.Getenv("SRT_MCP_PEERS")
	}
	if dir == "" {
		dir = "bench/peers"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}

// peer is another code-running MCP server, spoken to over stdio.
type peer struct {
	name string
	argv []string // starts its stdio server; nil when it cannot be
	// absent says why argv is nil; offline says why a failed call may
	// have failed here (no network but loopback and package registries).
	absent, offline string
	call            costCall
}

// peers are the servers the table sets beside srt-mcp.
func (s *suite) peers(dir string) []peer {
	runPython := peer{name: "mcp-run-python 0.0.5",
		offline: "Pyodide loads micropip and pydantic from its CDN at the first call, and only npm is reachable here",
		call:    costCall{"print(\"hello\")", "run_python_code", map[string]any{"python_code": `print("hello")`}}}
	cli := filepath.Join(dir, "node_modules", "@pydantic", "mcp-run-python", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		runPython.absent = "not installed: run make peers (npm ci in bench/peers), or give --peers-dir"
	} else {
		runPython.argv = []string{"node", cli, "stdio"}
	}
	e2b := peer{name: "E2B mcp-server (packages/js)",
		offline: "run_code makes a sandbox in E2B's cloud (E2B_API_KEY and its network)",
		call:    costCall{"print(\"hello\")", "run_code", map[string]any{"code": `print("hello")`}}}
	server := s.E2BServer
	if server == "" {
		server = os.Getenv("SRT_MCP_E2B_SERVER")
	}
	if server == "" {
		e2b.absent = "no build given: @e2b/mcp-server, the name its README gives, is not on the npm registry; " +
			"build github.com/e2b-dev/mcp-server packages/js and give --e2b-server build/index.js"
	} else {
		e2b.argv = []string{"node", server}
	}
	return []peer{runPython, e2b}
}

// measure weighs a peer's catalogue and its reply to its print call; what
// it cannot measure it says why.
func (p peer) measure() (catalogueCost, replyCost) {
	c := catalogueCost{Server: p.name, Profile: "(one set)"}
	r := replyCost{Server: p.name, Call: p.call.label}
	notMeasured := func(why string) (catalogueCost, replyCost) {
		if c.Bytes == 0 {
			c.Note = "not measured: " + why
		}
		r = replyCost{Server: r.Server, Call: r.Call, Note: "not measured: " + why}
		return c, r
	}
	if p.argv == nil {
		return notMeasured(p.absent)
	}
	sp, err := startStdioPeer(p.argv...)
	if err != nil {
		return notMeasured(err.Error())
	}
	defer sp.stop()
	lc, err := listCost(sp.rpcRaw)
	if err != nil {
		return notMeasured(err.Error())
	}
	lc.Server, lc.Profile = c.Server, c.Profile
	c = lc
	raw, err := sp.rpcRaw("tools/call", map[string]any{"name": p.call.tool, "arguments": p.call.args})
	if err == nil {
		r, err = measureReply(r, raw)
	}
	if err != nil {
		return notMeasured(fmt.Sprintf("%s (%v)", p.offline, err))
	}
	return c, r
}

// stdioPeer is an MCP server over stdio (newline-delimited JSON-RPC), as
// a desktop host starts one.
type stdioPeer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte
	id    int
}

// peerTimeout bounds one request: mcp-run-python loads Pyodide at its
// first call, a few seconds on this machine.
const peerTimeout = 120 * time.Second

// startStdioPeer starts argv and initializes an MCP session with it.
func startStdioPeer(argv ...string) (*stdioPeer, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &stdioPeer{cmd: cmd, stdin: stdin, lines: make(chan []byte, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
	}()
	if _, err := p.rpcRaw("initialize", map[string]any{"protocolVersion": "2025-03-26", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "srt-mcp-bench", "version": "1"}}); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %v", filepath.Base(argv[len(argv)-1]), err)
	}
	_, err = p.rpcRaw("notifications/initialized", nil)
	return p, err
}

// rpcRaw sends one request and returns its result, skipping the peer's
// notifications and requests of its own.
func (p *stdioPeer) rpcRaw(method string, params any) (json.RawMessage, error) {
	if _, err := p.stdin.Write(append(jsonrpcRequest(method, params, &p.id), '\n')); err != nil {
		return nil, err
	}
	if strings.HasPrefix(method, "notifications/") {
		return nil, nil
	}
	want := strconv.Itoa(p.id)
	timeout := time.After(peerTimeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return nil, errors.New("the server exited")
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &msg) == nil && msg.Method == "" && string(msg.ID) == want {
				return jsonrpcResult(method, line)
			}
		case <-timeout:
			return nil, fmt.Errorf("%s: no answer in %s", method, peerTimeout)
		}
	}
}

// stop closes the peer's stdin (how a stdio server is told to end) and
// kills it if it has not ended in two seconds.
func (p *stdioPeer) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// count fills in the token counts: o200k_base through bench/peers'
// tokens.mjs when node and gpt-tokenizer are there, else bytes/4.
func (t *costTable) count(peersDir string) {
	var texts []*string
	var counts []*int
	for i := range t.Catalogues {
		c := &t.Catalogues[i]
		texts, counts = append(texts, &c.listing), append(counts, &c.Tokens)
	}
	for i := range t.Replies {
		r := &t.Replies[i]
		texts, counts = append(texts, &r.text, &r.sc), append(counts, &r.TextTokens, &r.StructuredTokens)
	}
	plain := make([]string, len(texts))
	for i, p := range texts {
		plain[i] = *p
	}
	n, err := tokenize(peersDir, plain)
	if err != nil {
		t.Tokenizer = "≈ bytes/4 (no tokenizer: " + err.Error() + ")"
		n = make([]int, len(plain))
		for i, s := range plain {
			n[i] = (len(s) + 3) / 4
		}
	} else {
		t.Tokenizer = "o200k_base (gpt-tokenizer; Claude's tokenizer is not public)"
	}
	for i := range counts {
		*counts[i] = n[i]
	}
}

// tokenize counts texts' tokens with bench/peers/tokens.mjs.
func tokenize(peersDir string, texts []string) ([]int, error) {
	if _, err := os.Stat(filepath.Join(peersDir, "node_modules", "gpt-tokenizer")); err != nil {
		return nil, errors.New("gpt-tokenizer is not installed in " + peersDir)
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command("node", filepath.Join(peersDir, "tokens.mjs"))
	cmd.Dir = peersDir
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tokens.mjs: %v", err)
	}
	var counts []int
	if err := json.Unmarshal(out, &counts); err != nil || len(counts) != len(texts) {
		return nil, fmt.Errorf("tokens.mjs answered %q", out)
	}
	return counts, nil
}

// writeCosts prints the cost tables as markdown (README.md's "Cost per
// model turn" is this output).
func (s *suite) writeCosts(t costTable) { writeCostTables(s.Out, t) }

func writeCostTables(w io.Writer, t costTable) {
	fmt.Fprintf(w, "| server | tools | tools/list bytes | tokens |\n|---|--:|--:|--:|\n")
	for _, c := range t.Catalogues {
		name := c.Server
		if c.Profile != "" && c.Server == "srt-mcp" {
			name += " `" + c.Profile + "`"
		}
		if c.Note != "" {
			fmt.Fprintf(w, "| %s | %s | | |\n", name, c.Note)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s |\n", name, c.Tools, thousands(c.Bytes), thousands(c.Tokens))
	}
	fmt.Fprintf(w, "\n| server | call | content[0].text bytes (most hosts) | structuredContent bytes (Claude Code) | "+
		"whole result bytes | tokens: text / structured | also in the reply |\n|---|---|--:|--:|--:|--:|---|\n")
	for _, r := range t.Replies {
		if !r.measured {
			fmt.Fprintf(w, "| %s | %s | %s | | | | |\n", r.Server, r.Call, r.Note)
			continue
		}
		sc, tokens := "none", thousands(r.TextTokens)
		if r.Structured > 0 {
			sc, tokens = thousands(r.Structured), tokens+" / "+thousands(r.StructuredTokens)
		}
		also := strings.TrimPrefix(strings.Join([]string{r.Extra, r.Note}, "; "), "; ")
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Server, r.Call, thousands(r.Text), sc, thousands(r.Result), tokens,
			strings.TrimSuffix(also, "; "))
	}
	fmt.Fprintf(w, "\ntokens: %s\n", t.Tokenizer)
}

// thousands is n with commas between its thousands: 11,903.
func thousands(n int) string {
	d := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return d
}

// addCostRows gives bench --all its rows: the full catalogue against the
// issue's 12 KB budget, the one-tool profile against mcp-run-python's one
// tool, and the 200 KB stdout's reply against the 50,000 characters past
// which Claude Code moves a result to a file.
func (s *suite) addCostRows(t costTable) {
	peerList := "not measured"
	for _, c := range t.Catalogues {
		if strings.HasPrefix(c.Server, "mcp-run-python") && c.Note == "" {
			peerList = thousands(c.Bytes) + " B"
		}
	}
	for _, c := range t.Catalogues {
		switch c.Profile {
		case "--tools all":
			s.add(Row{Path: "catalogue: tools/list bytes, --tools all", Now: thousands(c.Bytes) + " B", Anchor: "",
				Goal: "<= 12,288 B", Met: c.Bytes <= 12<<10})
		case "--tools execute_code":
			s.add(Row{Path: "catalogue: --tools execute_code vs mcp-run-python's", Now: thousands(c.Bytes) + " B", Anchor: peerList,
				Goal: "<= 2,048 B", Met: c.Bytes <= 2<<10})
		}
	}
	for _, r := range t.Replies {
		if r.Server == "srt-mcp" && strings.Contains(r.Call, "200 KB") && r.measured {
			biggest := max(r.Text, r.Structured)
			s.add(Row{Path: "reply to a 200 KB stdout (content[0].text, structured)", Now: thousands(biggest) + " B",
				Goal: "< 50,000 B", Met: biggest < 50_000})
		}
	}
}
