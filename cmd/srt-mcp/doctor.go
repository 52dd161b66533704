package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
)

var doctorCommand = &cli.Command{
	Name:  "doctor",
	Usage: "report what this host supports for sandboxing, and how to fix what is missing",
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
	},
	Action: runDoctor,
}

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, missing
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func runDoctor(c *cli.Context) error {
	checks := hostChecks()
	checks = append(checks, liveCheck())
	checks = append(checks, pythonChecks()...)
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
// the kernel or a security module still refuses.
func liveCheck() check {
	p, err := profiles.Get("exec")
	if err != nil {
		return check{Name: "sandbox start", Status: "missing", Detail: err.Error()}
	}
	wd, _ := os.Getwd()
	if wd == "" {
		wd = "/"
	}
	spec := runner.Spec{Version: runner.SpecVersion, ID: uuid.NewString(), Argv: []string{"/bin/sh", "-c", "exit 7"}, Cwd: wd, Policy: p, Stdin: runner.StdinNull}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	run, err := runner.Start(ctx, spec, func(runner.Event) {}, runner.Options{Egress: egress})
	if err != nil {
		return check{Name: "sandbox start", Status: "missing", Detail: err.Error(), Fix: "see the message above; srt-mcp never runs unsandboxed"}
	}
	end := run.Wait()
	if end.Type != runner.EventExit || end.ExitCode != 7 {
		return check{Name: "sandbox start", Status: "missing", Detail: fmt.Sprintf("unexpected end: %s %s %s", end.Type, end.ErrCode, end.Message)}
	}
	return check{Name: "sandbox start", Status: "ok", Detail: fmt.Sprintf("a sandboxed /bin/sh ran and exited in %s", time.Since(start).Round(time.Millisecond))}
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
