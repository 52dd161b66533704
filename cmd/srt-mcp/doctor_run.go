//go:build !embedserver

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	osuser "os/user"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/dockerbox"
	"github.com/srt-mcp/srt-mcp/netproxy"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, missing
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func runDoctor(c *cli.Context) error {
	user, err := sandboxUser(c)
	if err != nil {
		return err
	}
	checks := hostChecks()
	checks = append(checks, containerChecks()...)
	checks = append(checks, liveCheck(user)...)
	checks = append(checks, pythonChecks()...)
	checks = append(checks, dockerChecks(c.String("image"))...)
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(checks)
	}
	bad := 0
	var fixes []string
	for _, ch := range checks {
		mark := map[string]string{"ok": "ok     ", "warn": "warn   ", "missing": "MISSING"}[ch.Status]
		fmt.Printf("%s %-26s %s\n", mark, ch.Name, ch.Detail)
		if ch.Status == "missing" {
			bad++
		}
		if ch.Fix != "" {
			fixes = append(fixes, ch.Fix)
		}
	}
	if len(fixes) > 0 {
		fmt.Println("\nTo fix:")
		seen := map[string]bool{}
		for _, f := range fixes {
			if !seen[f] {
				fmt.Println("  " + f)
				seen[f] = true
			}
		}
	}
	if bad > 0 {
		return cli.Exit("", 1)
	}
	return nil
}

// liveCheck starts a real sandbox: everything above can look fine while
// the kernel or a security module still refuses. From inside it reports
// who the sandbox is on the host and whether /proc/sys is read-only.
func liveCheck(user *runner.SandboxUser) []check {
	p, err := profiles.Get("exec")
	if err != nil {
		return []check{{Name: "sandbox start", Status: "missing", Detail: err.Error()}}
	}
	script := `id -u; id -g; awk '$5 == "/proc/sys" { print $6 }' /proc/self/mountinfo; exit 7`
	spec := runner.Spec{Version: runner.SpecVersion, ID: uuid.NewString(), Argv: []string{"/bin/sh", "-c", script}, Cwd: runner.SandboxTmp,
		PrivateCwd: true, Policy: p, Stdin: runner.StdinNull, User: user}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	var out strings.Builder
	sink := func(e runner.Event) {
		if e.Type == runner.EventStdout {
			out.Write(e.Data)
		}
	}
	// Started by the light binary (make build), the doctor runs in the
	// embedded server build: sandboxes run that light binary, as a
	// server's do.
	run, err := runner.Start(ctx, spec, sink, runner.Options{Egress: netproxy.Egress, Self: stageBinary()})
	if err != nil {
		return []check{{Name: "sandbox start", Status: "missing", Detail: err.Error(), Fix: "see the message above; srt-mcp never runs unsandboxed"}}
	}
	end := run.Wait()
	if end.Type != runner.EventExit || end.ExitCode != 7 {
		return []check{{Name: "sandbox start", Status: "missing", Detail: fmt.Sprintf("unexpected end: %s %s %s", end.Type, end.ErrCode, end.Message)}}
	}
	checks := []check{{Name: "sandbox start", Status: "ok", Detail: fmt.Sprintf("a sandboxed /bin/sh ran and exited in %s", time.Since(start).Round(time.Millisecond))}}
	f := strings.Fields(out.String())
	for len(f) < 3 {
		f = append(f, "")
	}
	uid, gid, procSys := f[0], f[1], f[2]
	switch {
	case uid == "0":
		checks = append(checks, check{Name: "sandbox user", Status: "missing", Detail: "the sandboxed command ran as uid 0", Fix: "report this: srt-mcp must never run untrusted code as root"})
	case os.Geteuid() == 0:
		detail := fmt.Sprintf("srt-mcp runs as root; sandboxes run as the unprivileged host uid %s, gid %s (--sandbox-user), in a user namespace of their own: never as uid 0", uid, gid)
		st := "ok"
		fix := ""
		if u, err := osuser.LookupId(uid); err == nil {
			detail += fmt.Sprintf("; uid %s is the account %q", uid, u.Username)
			if sh := loginShell(u.Username); sh != "" {
				st, fix = "warn", fmt.Sprintf("choose a --sandbox-user no one logs in as: %q has the shell %s and could reach running sandboxes' files", u.Username, sh)
			}
		}
		checks = append(checks, check{Name: "sandbox user", Status: st, Detail: detail, Fix: fix})
	default:
		checks = append(checks, check{Name: "sandbox user", Status: "ok", Detail: fmt.Sprintf("sandboxes run as your own uid %s (unprivileged), in a user namespace of their own", uid)})
	}
	if strings.HasPrefix(procSys, "ro") {
		checks = append(checks, check{Name: "/proc/sys in sandboxes", Status: "ok", Detail: "read-only (so are sysrq-trigger, irq, bus, fs; kcore, keys, timer_list, sched_debug are masked)"})
	} else {
		checks = append(checks, check{Name: "/proc/sys in sandboxes", Status: "missing", Detail: "not a read-only mount in the sandbox (" + procSys + ")", Fix: "report this: /proc/sys must be read-only in every sandbox"})
	}
	return checks
}

// dockerChecks reports what --backend docker would find: the engine, the
// image (built by this srt-mcp, or pinned by digest), and how sessions and
// runs are kept apart. A host without an engine is fine for the native
// backend.
func dockerChecks(image string) []check {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return []check{{Name: "docker backend", Status: "ok", Detail: "no Docker client configuration (only --backend docker needs an engine)"}}
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return []check{{Name: "docker backend", Status: "ok", Detail: "no Docker engine reachable at " + cli.DaemonHost() + " (only --backend docker needs one)"}}
	}
	var out []check
	if err := dockerbox.CheckImage(ctx, cli, image); err != nil {
		out = append(out, check{Name: "docker image", Status: "warn", Detail: err.Error(), Fix: "srt-mcp image build --tag " + image})
	} else {
		out = append(out, check{Name: "docker image", Status: "ok", Detail: image + " was built by this srt-mcp (or is pinned by digest)"})
	}
	if os.Geteuid() == 0 {
		out = append(out, check{Name: "docker isolation", Status: "ok", Detail: fmt.Sprintf("each session's container runs as its own host uid (from %d up); each run gets a cgroup of its own, killed from the host", sessions.DefaultUIDs.First)})
	} else {
		out = append(out, check{Name: "docker isolation", Status: "warn", Detail: "not root: every session's container runs as your uid, and a run's processes are found by their process tree (what re-parents to the container's init escapes)", Fix: "run srt-mcp serve --backend docker as root"})
	}
	return out
}

// loginShell returns name's shell from /etc/passwd when it is one a person
// could log in with, "" otherwise.
func loginShell(name string) string {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == name {
			if strings.HasSuffix(f[6], "nologin") || strings.HasSuffix(f[6], "/false") || f[6] == "" {
				return ""
			}
			return f[6]
		}
	}
	return ""
}

func pythonChecks() []check {
	const apt = "apt-get install -y python3 python3-pandas python3-numpy python3-matplotlib python3-seaborn python3-reportlab python3-openpyxl python3-scipy"
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		return []check{{Name: "python3", Status: "warn", Detail: "/usr/bin/python3 not found (needed for run_python)", Fix: apt}}
	}
	out, _ := exec.Command(py, "-c", `import importlib.util as u, sys
mods = ["pandas","numpy","matplotlib","seaborn","reportlab","openpyxl","scipy"]
print(sys.version.split()[0]); print(" ".join(m for m in mods if u.find_spec(m) is None))`).Output()
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	res := []check{{Name: "python3", Status: "ok", Detail: py + " " + lines[0]}}
	if len(lines) > 1 && strings.TrimSpace(lines[1]) != "" {
		res = append(res, check{Name: "python data stack", Status: "warn", Detail: "missing modules: " + lines[1], Fix: apt})
	} else {
		res = append(res, check{Name: "python data stack", Status: "ok", Detail: "pandas numpy matplotlib seaborn reportlab openpyxl scipy"})
	}
	return res
}
