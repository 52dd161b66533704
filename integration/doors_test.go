package integration

// One behaviour suite, every front door: the same table of cases (a run,
// its exit code, the files it writes, the output cap, the code limit, a
// busy session, a run ended by its session's close or its caller's going
// away, the audit line, the workspace quota) runs against each door the
// way its clients drive it (MCP execute_code cells and commands, run_python,
// sandbox.run_code, the LibreChat Code API, the playground's API), on
// each backend; the Makefile runs it as root and as nobody. Every door is
// a thin translation onto one run service, so any difference here is a
// door's bug.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// doorRun is what a door reported about one run.
type doorRun struct {
	exit      int // -999: the door reported none
	stdout    string
	stderr    string
	files     map[string]string // name -> a URL that downloads it
	truncated bool
	errCode   string // the door refused or reported a failure: its code or message
	sessionID string
	raw       string
}

func (r doorRun) String() string { return r.raw }

// door drives one front door.
type door struct {
	name string
	// op is the door's audit op.
	op string
	// run runs Python code in the door's session (ctx ending: the caller
	// goes away).
	run func(ctx context.Context, t *testing.T, code string) doorRun
	// close ends the door's session as its caller would (nil: the door's
	// callers end runs by going away).
	close func(t *testing.T)
	// reportsTruncation: the door says when output was cut.
	reportsTruncation bool
	// command: a shell command, under the operator's command limits
	// (--max-output, no code-size limit), not the data runs'.
	command bool
	// sessionBusy: the door has a session a second caller can find busy.
	sessionBusy bool
	// audited is what the audit line hashes for code (default: the code).
	audited func(code string) string
}

const doorLCKey = "doors-lc-key"

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// doors builds every door onto one server.
func doors(t *testing.T, d *dataServer) []door {
	var out []door
	exitOf := func(v any) int {
		if f, ok := v.(float64); ok {
			return int(f)
		}
		return -999
	}
	errOf := func(v map[string]any, isErr bool) string {
		if !isErr {
			return ""
		}
		if e, ok := v["error"].(string); ok && e != "" {
			return e
		}
		if o, ok := v["output"].(string); ok {
			return o
		}
		return fmt.Sprint(v)
	}
	mcpFiles := func(sid string, arts any) map[string]string {
		files := map[string]string{}
		list, _ := arts.([]any)
		for _, a := range list {
			m := a.(map[string]any)
			name, _ := m["filename"].(string)
			if name == "" {
				name, _ = m["name"].(string)
			}
			u, _ := m["download_url"].(string)
			if u == "" {
				u, _ = m["url"].(string)
			}
			files[name] = u
		}
		return files
	}
	callCtx := func(ctx context.Context, name string, args map[string]any) (map[string]any, bool) {
		t.Helper()
		c := connect(t, d.url) // a caller of its own: its going away is its own
		type res struct {
			v     map[string]any
			isErr bool
		}
		ch := make(chan res, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = name, args
			rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			out, err := c.CallTool(rctx, req)
			if err != nil {
				ch <- res{map[string]any{"error": "transport: " + err.Error()}, true}
				return
			}
			b, _ := json.Marshal(out.StructuredContent)
			var v map[string]any
			_ = json.Unmarshal(b, &v)
			ch <- res{v, out.IsError}
		}()
		select {
		case r := <-ch:
			return r.v, r.isErr
		case <-ctx.Done():
			_ = c.Close() // the client goes away
			return map[string]any{"error": "caller gone"}, true
		}
	}

	// MCP execute_code with code: a cell in an explicit session's kernel.
	cell := d.wantErrorless("create_session", map[string]any{"language": "python"})["session_id"].(string)
	out = append(out, door{name: "mcp-cell", op: "execute_code", sessionBusy: true, reportsTruncation: true,
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			v, isErr := callCtx(ctx, "execute_code", map[string]any{"code": code, "language": "python", "session_id": cell})
			tr, _ := v["truncated"].(bool)
			return doorRun{exit: exitOf(v["exit_code"]), stdout: fmt.Sprint(v["stdout"]), stderr: fmt.Sprint(v["stderr"]),
				files: mcpFiles(cell, v["artifacts"]), truncated: tr, errCode: errOf(v, isErr), sessionID: cell, raw: fmt.Sprint(v)}
		},
		close: func(t *testing.T) { d.wantErrorless("destroy_session", map[string]any{"session_id": cell}) }})

	// MCP execute_code with a command, in a data session.
	cmdSID := d.upload("", "seed.txt", "seed")
	out = append(out, door{name: "mcp-command", op: "execute_code", sessionBusy: true, reportsTruncation: true, command: true,
		audited: func(code string) string { return "exec /usr/bin/python3 -c " + shellQuote(code) },
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			v, isErr := callCtx(ctx, "execute_code", map[string]any{"command": "exec /usr/bin/python3 -c " + shellQuote(code), "session_id": cmdSID})
			var so, se strings.Builder
			evs, _ := v["output"].([]any)
			for _, e := range evs {
				m := e.(map[string]any)
				switch m["type"] {
				case "stdout":
					so.WriteString(fmt.Sprint(m["data"]))
				case "stderr":
					se.WriteString(fmt.Sprint(m["data"]))
				}
			}
			tr, _ := v["truncated"].([]any)
			files := map[string]string{}
			if !isErr {
				list, _ := d.call("list_artifacts", map[string]any{"session_id": cmdSID})
				files = mcpFiles(cmdSID, list["artifacts"])
			}
			return doorRun{exit: exitOf(v["exit_code"]), stdout: so.String(), stderr: se.String(), files: files, truncated: len(tr) > 0,
				errCode: errOf(v, isErr), sessionID: cmdSID, raw: fmt.Sprint(v)}
		},
		close: func(t *testing.T) { d.wantErrorless("close_session", map[string]any{"session_id": cmdSID}) }})

	// Seed 000's run_python.
	pySID := d.upload("", "seed.txt", "seed")
	out = append(out, door{name: "run_python", op: "run_python", sessionBusy: true, reportsTruncation: true,
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			v, isErr := callCtx(ctx, "run_python", map[string]any{"code": code, "session_id": pySID})
			tr, _ := v["stdout_truncated"].(bool)
			return doorRun{exit: exitOf(v["exit_code"]), stdout: fmt.Sprint(v["stdout"]), stderr: fmt.Sprint(v["stderr"]),
				files: mcpFiles(pySID, v["artifacts"]), truncated: tr, errCode: errOf(v, isErr), sessionID: pySID, raw: fmt.Sprint(v)}
		},
		close: func(t *testing.T) { d.wantErrorless("close_session", map[string]any{"session_id": pySID}) }})

	// Seed 003's sandbox.run_code.
	conv := "doors-" + randHex(4)
	var rcSID string // the conversation's workspace, as its first reply names it
	out = append(out, door{name: "run_code", op: "sandbox.run_code", sessionBusy: true,
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			v, isErr := callCtx(ctx, "sandbox.run_code", map[string]any{"conversationId": conv, "language": "python", "code": code})
			if sid, _ := v["session_id"].(string); sid != "" {
				rcSID = sid
			}
			exit := -999
			if ok, _ := v["success"].(bool); ok {
				exit = 0
			}
			out := fmt.Sprint(v["output"])
			return doorRun{exit: exit, stdout: out, stderr: out, files: mcpFiles(rcSID, v["files"]), errCode: errOf(v, isErr), sessionID: rcSID, raw: fmt.Sprint(v)}
		},
		close: func(t *testing.T) { d.wantErrorless("close_session", map[string]any{"session_id": rcSID}) }})

	// The LibreChat Code API (a stored session per exec).
	lc := d.base() + "/v1/librechat"
	out = append(out, door{name: "librechat", op: "librechat.exec",
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			code2, v, raw := doorHTTP(ctx, t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": code}, map[string]string{"X-API-Key": doorLCKey})
			r := doorRun{exit: -999, raw: raw, files: map[string]string{}}
			if code2 != 200 {
				r.errCode = fmt.Sprintf("%d %v", code2, v["error"])
				return r
			}
			r.exit = exitOf(v["code"])
			r.stdout, r.stderr = fmt.Sprint(v["stdout"]), fmt.Sprint(v["stderr"])
			r.sessionID, _ = v["session_id"].(string)
			fl, _ := v["files"].([]any)
			for _, f := range fl {
				m := f.(map[string]any)
				r.files[fmt.Sprint(m["name"])] = lc + "/download/" + fmt.Sprint(m["storage_session_id"]) + "/" + fmt.Sprint(m["id"])
			}
			return r
		}})

	// The playground's API (server-sent events).
	pgConv := "doors-" + randHex(4)
	out = append(out, door{name: "playground", op: "playground.run", sessionBusy: true,
		run: func(ctx context.Context, t *testing.T, code string) doorRun {
			return playgroundRun(ctx, t, d.base(), pgConv, code)
		}})
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// doorHTTP sends a JSON request and decodes a JSON reply.
func doorHTTP(ctx context.Context, t *testing.T, method, url string, body any, hdr map[string]string) (int, map[string]any, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, map[string]any{"error": err.Error()}, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return resp.StatusCode, v, string(raw)
}

// playgroundRun runs code through /playground/api/run and reads its events.
func playgroundRun(ctx context.Context, t *testing.T, base, conv, code string) doorRun {
	b, _ := json.Marshal(map[string]any{"language": "python", "code": code, "conversation": conv})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/playground/api/run", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	r := doorRun{exit: -999, files: map[string]string{}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.errCode, r.raw = err.Error(), err.Error()
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		var v map[string]any
		_ = json.Unmarshal(raw, &v)
		r.errCode, r.raw = fmt.Sprintf("%d %v %v", resp.StatusCode, v["code"], v["error"]), string(raw)
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev string
	var raw strings.Builder
	for sc.Scan() {
		line := sc.Text()
		raw.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var v map[string]any
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v)
			switch ev {
			case "stdout":
				r.stdout += fmt.Sprint(v["data"])
			case "stderr":
				r.stderr += fmt.Sprint(v["data"])
			case "done":
				if f, ok := v["exit_code"].(float64); ok {
					r.exit = int(f)
				}
				if m, _ := v["message"].(string); m != "" {
					r.stderr += "\n" + m
					if strings.HasPrefix(m, "quota_exceeded") {
						r.errCode = m
					}
				}
				r.sessionID, _ = v["session_id"].(string)
				fl, _ := v["files"].([]any)
				for _, f := range fl {
					m := f.(map[string]any)
					r.files[fmt.Sprint(m["name"])] = fmt.Sprint(m["url"])
				}
			}
		}
	}
	r.raw = raw.String()
	return r
}

func TestDoors(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDoors)
}

func testDoors(t *testing.T, backend []string) {
	d := startData(t, backend, "--librechat-api-key", doorLCKey, "--librechat-rate-scale", "10", "--workspace-quota", "6M", "--max-output-bytes", "4096",
		"--max-code-bytes", "20000", "--exec-timeout-seconds", "120")
	fsMode := workspaceFS(t, d.url)
	for _, dr := range doors(t, d) {
		t.Run(dr.name, func(t *testing.T) {
			ctx := context.Background()
			run := func(code string) doorRun { return dr.run(ctx, t, code) }

			// A run: its output and exit code.
			r := run(`print("hello from a door")`)
			if r.errCode != "" || r.exit != 0 || !strings.Contains(r.stdout, "hello from a door") {
				t.Fatalf("run: %s", r)
			}
			if dr.name != "run_code" { // seed 003 reports success, not the status
				r = run("import sys\nprint('to stderr', file=sys.stderr)\nsys.exit(3)")
				if r.exit != 3 || !strings.Contains(r.stderr, "to stderr") {
					t.Errorf("exit 3: %s", r)
				}
			}

			// The files a run writes: reported, and downloadable.
			r = run(`open("door-out.txt", "w").write("forty-two")`)
			if u := r.files["door-out.txt"]; r.exit != 0 || u == "" {
				t.Errorf("files: door-out.txt not reported with a URL: %s", r)
			} else {
				req, _ := http.NewRequest("GET", u, nil)
				req.Header.Set("X-API-Key", doorLCKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "forty-two" {
					t.Errorf("download of door-out.txt: %d %q", resp.StatusCode, body)
				}
			}

			// The output cap: 4096 bytes per stream; the code limit: 20000
			// bytes.
			if !dr.command {
				r = run(`print("x" * 100000)`)
				if n := strings.Count(r.stdout, "x"); n > 4096 || n < 1000 || (dr.reportsTruncation && !r.truncated) {
					t.Errorf("output cap: %d x's, truncated %v: %.300s", n, r.truncated, r.raw)
				}
				r = run("x = 1\n" + strings.Repeat("#", 30000))
				if !strings.Contains(r.errCode+r.raw, "20000") {
					t.Errorf("code over the limit: %.300s", r.raw)
				}
			}

			// The audit line names the run and its code.
			code := `print("audited")`
			r = run(code)
			if r.sessionID == "" {
				t.Fatalf("the door named no session: %s", r)
			}
			if dr.audited != nil {
				code = dr.audited(code)
			}
			sum := sha256.Sum256([]byte(code))
			deadline := time.Now().Add(5 * time.Second)
			for {
				out, _ := exec.Command(nwBin(t), "audit", "--state-dir", d.state, r.sessionID).Output()
				if bytes.Contains(out, []byte(`"op":"`+dr.op+`"`)) && bytes.Contains(out, []byte(hex.EncodeToString(sum[:]))) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("audit log of %s lacks an %s line with the code's hash:\n%s", r.sessionID, dr.op, out)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}

			if fsMode == "filesystem" {
				// The workspace is a 6 MiB filesystem: the write past it
				// fails in the program, which sees ENOSPC and goes on.
				r = run(`
import errno, os
try:
    open("big.bin", "wb").write(b"\0" * (12 << 20))
except OSError as e:
    print("write failed:", errno.errorcode[e.errno])
os.remove("big.bin")`)
				if !strings.Contains(r.stdout, "write failed: ENOSPC") || r.errCode != "" {
					t.Errorf("a write past the workspace's filesystem: %.600s", r.raw)
				}
			} else {
				// The workspace quota (6 MiB): a run past it is stopped
				// and its new files removed; the earlier files stay; the
				// session works.
				r = run(`open("big.bin", "wb").write(b"\0" * (12 << 20))`)
				if !strings.Contains(r.errCode+r.stderr, "quota_exceeded") || !strings.Contains(r.raw, "SANDBOX_WORKSPACE_QUOTA") {
					t.Errorf("a run past the quota: %.600s", r.raw)
				}
				if _, ok := r.files["big.bin"]; ok {
					t.Errorf("the file past the quota is still reported: %s", r)
				}
			}
			r = run(`import os; print(sorted(f for f in os.listdir(".") if not f.startswith(".")))`)
			if r.exit != 0 || strings.Contains(r.stdout, "big.bin") || (dr.name != "librechat" && !strings.Contains(r.stdout, "door-out.txt")) {
				t.Errorf("after the quota: the session must work, big.bin gone, earlier files kept: %s", r)
			}

			// No spurious busy: back-to-back runs of one caller.
			for i := 0; i < 15; i++ {
				if r := run(fmt.Sprintf("print(%d)", i)); r.errCode != "" || r.exit != 0 {
					t.Fatalf("run %d of a caller that waits for each reply: %s", i, r)
				}
			}

			// A second caller while a run holds the session: busy.
			marker := fmt.Sprintf("61.%d", time.Now().UnixNano()%1_000_000)
			long := fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])", marker)
			if dr.sessionBusy {
				bctx, cancel := context.WithCancel(ctx)
				done := make(chan doorRun, 1)
				go func() { done <- dr.run(bctx, t, long) }()
				waitProcesses(t, marker, 20*time.Second)
				if r := run(`print(1)`); !strings.Contains(r.errCode+r.raw, "busy") && !strings.Contains(r.errCode, "409") {
					t.Errorf("a second run while the session is busy: %s", r)
				}
				cancel()
				<-done
				waitNoProcesses(t, marker, 15*time.Second)
				waitFree(t, run)
			}

			// The caller goes away mid-run: the run is stopped.
			marker = fmt.Sprintf("62.%d", time.Now().UnixNano()%1_000_000)
			long = fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])", marker)
			gctx, cancel := context.WithCancel(ctx)
			done := make(chan doorRun, 1)
			go func() { done <- dr.run(gctx, t, long) }()
			waitProcesses(t, marker, 20*time.Second)
			cancel()
			<-done
			waitNoProcesses(t, marker, 15*time.Second)
			waitFree(t, run)

			// The session closes mid-run: the run ends, cancelled.
			if dr.close != nil {
				marker = fmt.Sprintf("63.%d", time.Now().UnixNano()%1_000_000)
				long = fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])", marker)
				done := make(chan doorRun, 1)
				go func() { done <- dr.run(ctx, t, long) }()
				waitProcesses(t, marker, 20*time.Second)
				start := time.Now()
				dr.close(t)
				select {
				case r := <-done:
					if r.exit == 0 || time.Since(start) > 15*time.Second {
						t.Errorf("a run whose session closed: %s after %v", r, time.Since(start))
					}
				case <-time.After(20 * time.Second):
					t.Errorf("a run whose session closed did not end in 20 s")
				}
				waitNoProcesses(t, marker, 15*time.Second)
			}
		})
	}
}

// waitFree waits until the session takes a run again (a run its caller
// abandoned may still be stopping: a new caller meanwhile finds it busy).
func waitFree(t *testing.T, run func(string) doorRun) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := run("print('free')")
		if r.exit == 0 && strings.Contains(r.stdout, "free") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is not free 20 s after its caller went away: %s", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitProcesses waits until a process whose command line has marker runs.
func waitProcesses(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(processesWith(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no process with %q started in %v", marker, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
