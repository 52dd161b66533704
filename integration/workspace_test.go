package integration

// Stateful workspaces (seed 001 §5-6) through a real MCP client, on each
// backend: a persistent interpreter per MCP session.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestWorkspaceState(t *testing.T) {
	parallel(t)
	forEachBackend(t, testWorkspaceState)
}

func testWorkspaceState(t *testing.T, backend []string) {
	d := startData(t, backend)
	code := func(c string, extra ...any) (map[string]any, bool) {
		t.Helper()
		args := map[string]any{"code": c, "language": "python"}
		for i := 0; i+1 < len(extra); i += 2 {
			args[extra[i].(string)] = extra[i+1]
		}
		return d.call("execute_code", args)
	}
	// seed 001 §6.6: state across three calls, no session id.
	for _, c := range []string{"x = 42", "y = x * 2"} {
		if v, isErr := code(c); isErr || fmt.Sprint(v["exit_code"]) != "0" {
			t.Fatalf("%s: %v", c, v)
		}
	}
	v, _ := code("print(f'Result: {y}')")
	if v["stdout"] != "Result: 84\n" || v["stderr"] != "" || fmt.Sprint(v["exit_code"]) != "0" || v["execution_time_ms"] == nil {
		t.Fatalf("state across calls: %v", v)
	}
	sid := v["session_id"].(string)
	// A trailing expression is returned like a REPL; an exception is exit 1
	// with a traceback, and the state survives it.
	v, _ = code("import json\ny + 1")
	if v["stdout"] != "85\n" {
		t.Fatalf("REPL value: %v", v)
	}
	v, _ = code("{'a': 1}['sales_amount']")
	if fmt.Sprint(v["exit_code"]) != "1" || !strings.Contains(v["stderr"].(string), "KeyError: 'sales_amount'") {
		t.Fatalf("exception: %v", v)
	}
	// __stateless__ does not see it.
	v, _ = code("print(x)", "session_id", "__stateless__")
	if fmt.Sprint(v["exit_code"]) != "1" || !strings.Contains(v["stderr"].(string), "NameError") {
		t.Fatalf("stateless run saw the workspace: %v", v)
	}
	// Another client has its own workspace.
	other := connect(t, d.url)
	ov, _ := callTool(t, other, "execute_code", map[string]any{"code": "print(x)", "language": "python"})
	if !strings.Contains(fmt.Sprint(ov["stderr"]), "NameError") || ov["session_id"] == sid {
		t.Fatalf("another MCP session saw this workspace: %v", ov)
	}
	// Introspection of the running interpreter.
	info, isErr := d.call("get_workspace_info", map[string]any{})
	if isErr || info["session_id"] != sid || fmt.Sprint(info["variables"]) != "[x y]" || fmt.Sprint(info["imports"]) != "[json]" ||
		info["execution_count"].(float64) < 5 || info["memory_used_bytes"].(float64) <= 0 {
		t.Fatalf("get_workspace_info: %v", info)
	}
	// An infinite loop is interrupted at its timeout; the next cell works.
	v, _ = code("while True: pass", "timeout", 1)
	if fmt.Sprint(v["exit_code"]) != "-1" || !strings.Contains(v["stderr"].(string), "timed out after 1 seconds") {
		t.Fatalf("timeout: %v", v)
	}
	if v, _ := code("print(x)"); v["stdout"] != "42\n" {
		t.Fatalf("after the interrupt: %v", v)
	}
	// A cell that ignores SIGINT: the interpreter is restarted, and said so.
	v, _ = code("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)", "timeout", 1)
	if fmt.Sprint(v["exit_code"]) != "-1" || !strings.Contains(v["stderr"].(string), "restarted") {
		t.Fatalf("a wedged cell: %v", v)
	}
	v, _ = code("print('x' in dir())")
	if v["stdout"] != "False\n" || !strings.Contains(fmt.Sprint(v["note"]), "restart") {
		t.Fatalf("after a restart the reply must say the state is gone: %v", v)
	}
	// A figure becomes an artifact.
	v, _ = code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t')")
	if arts := fmt.Sprint(v["artifacts"]); !strings.Contains(arts, "figure_") || !strings.Contains(arts, "download_url") {
		t.Fatalf("figure artifact: %v", v)
	}
	// cancel_execution stops a running cell; the interpreter stays.
	code("keep = 1")
	av, isErr := d.call("execute_code_async", map[string]any{"code": "import time\ntime.sleep(60)", "language": "python"})
	if isErr {
		t.Fatalf("async cell: %v", av)
	}
	time.Sleep(300 * time.Millisecond)
	d.wantErrorless("cancel_execution", map[string]any{"execution_id": av["execution_id"]})
	done, _ := d.call("get_execution_output", map[string]any{"execution_id": av["execution_id"], "wait": true})
	if done["status"] != "cancelled" || fmt.Sprint(done["exit_code"]) != "130" {
		t.Fatalf("cancelled cell: want status cancelled, exit_code 130 (interrupted, as a shell says): %v", done)
	}
	if v, _ := code("print(keep)"); v["stdout"] != "1\n" {
		t.Fatalf("after cancel: %v", v)
	}
	// An interpreter that dies under its cell is a failure the caller
	// sees as one (isError, kernel_died), and the next cell gets a new one.
	if v, isErr := code("import os\nos.kill(os.getpid(), 9)"); !isErr || v["status"] != "failed" || !strings.Contains(fmt.Sprint(v), "kernel_died") {
		t.Fatalf("a dead interpreter: want isError with kernel_died, got isError=%v %v", isErr, v)
	}
	if v, _ := code("print(1)"); v["stdout"] != "1\n" {
		t.Fatalf("after the interpreter died: %v", v)
	}
	// A run_python whose session is closed under it was cancelled, not
	// timed out: exit_code 128+N (-1 is the timeout's).
	rsid := d.upload("", "r.txt", "r")
	rdone := make(chan map[string]any, 1)
	marker := fmt.Sprintf("65.%d", time.Now().UnixNano()%1_000_000)
	go func() {
		v, _ := d.call("run_python", map[string]any{"session_id": rsid, "code": fmt.Sprintf("import subprocess\nsubprocess.run(['sleep', '%s'])", marker)})
		rdone <- v
	}()
	waitProcesses(t, marker, 60*time.Second) // running (a Docker session's container takes a moment)
	d.wantErrorless("close_session", map[string]any{"session_id": rsid})
	select {
	case v := <-rdone:
		if c := fmt.Sprint(v["exit_code"]); c != "143" && c != "137" {
			t.Fatalf("a cancelled run_python: want exit_code 143 (or 137), got %v", v)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a run_python whose session closed did not end")
	}
	// reset_workspace clears the variables, keeps the files.
	code("open('/mnt/data/kept.txt', 'w').write('k')")
	if v, isErr := d.call("reset_workspace", map[string]any{}); isErr || v["status"] != "reset" {
		t.Fatalf("reset: %v", v)
	}
	if info, _ := d.call("get_workspace_info", map[string]any{}); fmt.Sprint(info["variables"]) != "[]" {
		t.Fatalf("after reset: %v", info)
	}
	if v, _ := code("print(open('/mnt/data/kept.txt').read())"); v["stdout"] != "k\n" {
		t.Fatalf("files after reset: %v", v)
	}
}

func (d *dataServer) wantErrorless(name string, args map[string]any) map[string]any {
	d.t.Helper()
	v, isErr := d.call(name, args)
	if isErr {
		d.t.Fatalf("%s %v: %v", name, args, v)
	}
	return v
}

func TestWorkspaceExplicitSessions(t *testing.T) {
	parallel(t)
	forEachBackend(t, testWorkspaceExplicitSessions)
}

func testWorkspaceExplicitSessions(t *testing.T, backend []string) {
	d := startData(t, backend)
	v := d.wantErrorless("create_session", map[string]any{"language": "python", "timeout_seconds": 120})
	sid := v["session_id"].(string)
	if !strings.HasPrefix(sid, "sess_") || v["created_at"] == nil || v["expires_at"] == nil {
		t.Fatalf("create_session: %v", v)
	}
	d.wantError("create_session", map[string]any{"language": "cobol"}, "unsupported_language")
	d.wantError("create_session", map[string]any{"language": "python", "memory_limit_mb": 10}, "invalid_arguments")
	d.wantErrorless("execute_code", map[string]any{"code": "n = 7", "language": "python", "session_id": sid})
	if v, _ := d.call("execute_code", map[string]any{"code": "print(n)", "language": "python"}); !strings.Contains(fmt.Sprint(v["stderr"]), "NameError") {
		t.Fatalf("the connection's workspace saw an explicit session's variable: %v", v)
	}
	if v, _ := d.call("execute_code", map[string]any{"code": "n * 6", "language": "python", "session_id": sid}); v["stdout"] != "42\n" {
		t.Fatalf("explicit session state: %v", v)
	}
	// The same files as the data tools.
	if v, _ := d.call("run_python", map[string]any{"session_id": sid, "code": "print(1)"}); v["stdout"] != "1\n" {
		t.Fatalf("run_python in an explicit session: %v", v)
	}
	rts := d.wantErrorless("list_runtimes", map[string]any{})
	if s := fmt.Sprint(rts["runtimes"]); !strings.Contains(s, "language:python") || !strings.Contains(s, "stateful:true") {
		t.Fatalf("list_runtimes: %v", rts)
	}
	// Two cells at once in one session: the second is refused, not queued.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		callTool(t, d.c, "execute_code", map[string]any{"code": "import time; time.sleep(1.5)", "language": "python", "session_id": sid})
	}()
	time.Sleep(400 * time.Millisecond)
	if v, isErr := d.call("execute_code", map[string]any{"code": "1", "language": "python", "session_id": sid}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), "session_busy") {
		t.Fatalf("a concurrent cell: %v", v)
	}
	wg.Wait()
	d.wantErrorless("destroy_session", map[string]any{"session_id": sid})
	if v, isErr := d.call("execute_code", map[string]any{"code": "1", "language": "python", "session_id": sid}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), "session_not_found") {
		t.Fatalf("a destroyed session: %v", v)
	}
}

// TestWorkspaceWarmPool: a new workspace claims a ready session whose
// interpreter already imported the data stack, with a clean namespace; the
// pool refills.
func TestWorkspaceWarmPool(t *testing.T) {
	parallel(t)
	forEachBackend(t, testWorkspaceWarmPool)
}

func testWorkspaceWarmPool(t *testing.T, backend []string) {
	d := startData(t, backend, "--warm-pool", "1")
	poolReady := func() float64 {
		_, _, body := httpGet(t, d.base()+"/healthz")
		var h map[string]any
		_ = json.Unmarshal(body, &h)
		n, _ := h["warm_pool_ready"].(float64)
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for poolReady() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool never filled")
		}
		time.Sleep(100 * time.Millisecond)
	}
	v, _ := d.call("execute_code", map[string]any{"code": "import sys\nprint(sorted(k for k in dir() if not k.startswith('_')), 'pandas' in sys.modules)", "language": "python"})
	if v["stdout"] != "['sys'] True\n" {
		t.Fatalf("a pooled workspace must have a clean namespace and a warm module cache: %v", v)
	}
	if n := poolReady(); n != 0 {
		t.Errorf("the claimed session is still in the pool (%v ready)", n)
	}
	deadline = time.Now().Add(60 * time.Second)
	for poolReady() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool did not refill")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Pooled sessions do not count against the cap, and are not visible.
	info, _ := d.call("get_workspace_info", map[string]any{})
	if fmt.Sprint(info["imports"]) != "[sys]" {
		t.Fatalf("workspace info: %v", info)
	}
}

// TestWorkspaceInstallPackage: pip through the proxy to a local index the
// operator allows; the package lands in the session and imports in the
// next cell; without the index's domain allowed, a clear error naming it.
func TestWorkspaceInstallPackage(t *testing.T) {
	parallel(t)
	forEachBackend(t, testWorkspaceInstallPackage)
}

func testWorkspaceInstallPackage(t *testing.T, backend []string) {
	srv := nwPackageIndex(t)
	index := "http://pypi.test:" + srv.port + "/simple/"
	d := startData(t, backend, append(pinned("pypi.test"), "--allow-domain", "pypi.test:"+srv.port, "--pip-index-url", index)...)
	d.call("execute_code", map[string]any{"code": "before = 1", "language": "python"}) // the kernel runs before the install
	v := d.wantErrorless("install_package", map[string]any{"package": "demo-pkg", "version": "1.0"})
	if v["success"] != true || v["version_installed"] != "1.0" || !strings.Contains(fmt.Sprint(v["network"]), "allow pypi.test") {
		t.Fatalf("install_package: %v", v)
	}
	r, _ := d.call("execute_code", map[string]any{"code": "import demo_pkg\ndemo_pkg.hello()", "language": "python"})
	if r["stdout"] != "'hi from demo_pkg'\n" {
		t.Fatalf("the installed package in the next cell: %v", r)
	}
	if exec.Command("/usr/bin/python3", "-c", "import demo_pkg").Run() == nil {
		t.Fatal("the package reached the host's Python")
	}
	d.wantError("install_package", map[string]any{"package": "demo-pkg; rm -rf /"}, "invalid_arguments")
	d.wantError("install_package", map[string]any{"package": "demo-pkg", "version": "1.0 --index-url http://evil"}, "invalid_arguments")
	// Not allowed by the operator: refused before pip runs, naming the domain.
	d2 := startData(t, backend, append(pinned("pypi.test"), "--pip-index-url", index)...)
	e := d2.wantError("install_package", map[string]any{"package": "demo-pkg"}, "network_not_allowed")
	if !strings.Contains(e["message"].(string), "--allow-domain pypi.test:"+srv.port) {
		t.Fatalf("the error must name the domain to allow: %v", e)
	}
}

// TestWorkspaceJavaScript: a persistent Node.js context per workspace.
func TestWorkspaceJavaScript(t *testing.T) {
	parallel(t)
	forEachBackend(t, testWorkspaceJavaScript)
}

func testWorkspaceJavaScript(t *testing.T, backend []string) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on this host")
	}
	d := startData(t, backend)
	js := func(c string, extra ...any) (map[string]any, bool) {
		args := map[string]any{"code": c, "language": "javascript"}
		for i := 0; i+1 < len(extra); i += 2 {
			args[extra[i].(string)] = extra[i+1]
		}
		return d.call("execute_code", args)
	}
	if contains(backend, "docker") {
		// The data image has no Node.js: a clear error, not a hang.
		v, isErr := js("1 + 1")
		if !isErr || !strings.Contains(fmt.Sprint(v["error"]), "runtime_unavailable") || !strings.Contains(fmt.Sprint(v["error"]), "--backend native") {
			t.Fatalf("javascript without node in the image: %v", v)
		}
		return
	}
	if v, _ := js("var a = 20; let b = 1; const os = require('os'); console.log('set')"); v["stdout"] != "set\n" {
		t.Fatalf("cell 1: %v", v)
	}
	if v, _ := js("a * 2 + b"); v["stdout"] != "41\n" {
		t.Fatalf("state across calls: %v", v)
	}
	if v, _ := js("a", "session_id", "__stateless__"); !strings.Contains(fmt.Sprint(v["stderr"]), "ReferenceError") {
		t.Fatalf("stateless javascript saw the workspace: %v", v)
	}
	info, _ := d.call("get_workspace_info", map[string]any{"language": "javascript"})
	if fmt.Sprint(info["variables"]) != "[a b os]" || fmt.Sprint(info["imports"]) != "[os]" {
		t.Fatalf("javascript workspace info: %v", info)
	}
	// Python and JavaScript share the workspace's files, not variables.
	js("require('fs').writeFileSync('/mnt/data/from-js.txt', 'js')")
	if v, _ := d.call("execute_code", map[string]any{"code": "print(open('/mnt/data/from-js.txt').read())", "language": "python"}); v["stdout"] != "js\n" {
		t.Fatalf("the workspace's files across languages: %v", v)
	}
	if v, _ := js("while (true) {}", "timeout", 1); fmt.Sprint(v["exit_code"]) != "-1" {
		t.Fatalf("an endless loop: %v", v)
	}
	if v, _ := js("a"); v["stdout"] != "20\n" {
		t.Fatalf("after the interrupt: %v", v)
	}
}

// TestWorkspaceRuntimes: every runtime of the registry that this host has
// runs a hello-world through execute_code, and a compile error is reported
// as such. With SRT_MCP_REQUIRE_CLIENTS=1 (make test, whose setup installs
// them) every language LibreChat names must be available.
func TestWorkspaceRuntimes(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"})
	programs := map[string]string{
		"python":     `print("hello from python")`,
		"javascript": `console.log("hello from javascript")`,
		"typescript": "const n: string = \"typescript\";\nconsole.log(`hello from ${n}`);",
		"bash":       `echo "hello from bash"`,
		"c":          "#include <stdio.h>\nint main(void) { printf(\"hello from c\\n\"); return 0; }\n",
		"cpp":        "#include <iostream>\nint main() { std::cout << \"hello from cpp\" << std::endl; }\n",
		"go":         "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello from go\") }\n",
		"java":       "public class Hello {\n  public static void main(String[] args) { System.out.println(\"hello from java\"); }\n}\n",
		"rust":       "fn main() { println!(\"hello from rust\"); }\n",
		"php":        "<?php echo \"hello from php\\n\";",
		"r":          `cat("hello from r\n")`,
		"fortran":    "program hello\n  print '(a)', 'hello from fortran'\nend program hello\n",
		"d":          "import std.stdio;\nvoid main() { writeln(\"hello from d\"); }\n",
	}
	broken := map[string]string{
		"c": "int main(void) { return undeclared; }\n", "cpp": "int main() { return undeclared; }\n",
		"go": "package main\nfunc main() { undeclared() }\n", "java": "public class B { void f() { undeclared(); } }\n",
		"rust": "fn main() { undeclared(); }\n", "typescript": "const x: number = 'not a number';\n",
		"fortran": "program p\n  call undeclared(\nend program p\n", "d": "void main() { undeclared(); }\n",
	}
	exits86 := map[string]string{
		"c": "int main(void) { return 86; }\n", "go": "package main\nimport \"os\"\nfunc main() { os.Exit(86) }\n",
		"rust": "fn main() { std::process::exit(86); }\n", "typescript": "declare const process: { exit(code: number): never };\nprocess.exit(86);\n",
	}
	rts := d.wantErrorless("list_runtimes", map[string]any{})
	available := map[string]bool{}
	for _, r := range rts["runtimes"].([]any) {
		r := r.(map[string]any)
		lang := r["language"].(string)
		if r["available"] == true {
			available[lang] = true
			if r["version"] == "" {
				t.Errorf("%s: available without a version", lang)
			}
		} else if r["reason"] == nil || r["reason"] == "" {
			t.Errorf("%s: unavailable without a reason: %v", lang, r)
		}
	}
	for lang, code := range programs {
		if !available[lang] {
			if os.Getenv("SRT_MCP_REQUIRE_CLIENTS") == "1" {
				t.Errorf("%s is not available; make test's setup installs it", lang)
			} else {
				t.Logf("%s: not installed here, skipped", lang)
			}
			continue
		}
		for _, sid := range []string{"", "__stateless__"} {
			v, isErr := d.call("execute_code", map[string]any{"code": code, "language": lang, "session_id": sid, "timeout": 120})
			if isErr || v["stdout"] != "hello from "+lang+"\n" || fmt.Sprint(v["exit_code"]) != "0" {
				t.Errorf("%s (session %q): %v", lang, sid, v)
			}
		}
		if exit86, ok := exits86[lang]; ok {
			// A program's own status is its own, whatever the number.
			v, _ := d.call("execute_code", map[string]any{"code": exit86, "language": lang, "timeout": 120})
			if v["compile_error"] == true || fmt.Sprint(v["exit_code"]) != "86" || strings.Contains(fmt.Sprint(v["stderr"]), "compilation failed") {
				t.Errorf("%s exiting 86 is not a compile error: %v", lang, v)
			}
		}
		if bad, ok := broken[lang]; ok {
			v, _ := d.call("execute_code", map[string]any{"code": bad, "language": lang, "timeout": 120})
			if v["compile_error"] != true || fmt.Sprint(v["exit_code"]) != "1" || !strings.Contains(fmt.Sprint(v["stderr"]), "compilation failed") {
				t.Errorf("%s compile error: %v", lang, v)
			}
		}
	}
	// Aliases, as LibreChat names them.
	if v, _ := d.call("execute_code", map[string]any{"code": `print("alias")`, "language": "py", "session_id": "__stateless__"}); v["stdout"] != "alias\n" {
		t.Errorf("alias py: %v", v)
	}
	if v, isErr := d.call("execute_code", map[string]any{"code": "x", "language": "cobol"}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), "unsupported_language") {
		t.Errorf("an unknown language: %v", v)
	}
}
