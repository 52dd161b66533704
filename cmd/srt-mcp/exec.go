package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/uuid"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/srt-mcp/srt-mcp/netproxy"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/runner"
)

// Exit codes of srt-mcp exec when the command itself did not decide one.
const (
	exitTimeout      = 124 // like timeout(1)
	exitSandboxError = 125 // the sandbox could not run the command
	exitNotExec      = 126
	exitNotFound     = 127
	exitUsage        = 2
)

var execCommand = &cli.Command{
	Name:      "exec",
	Usage:     "run a command in the sandbox, like srt, with output and exit code passed through",
	ArgsUsage: "[flags] -- CMD [ARGS...]",
	Description: `The command sees a read-only minimal system (/usr, /bin, /lib*, parts of /etc),
the working directory read-only, a private writable /tmp (also HOME), and no
network. Flags and --settings widen or narrow that. Exit status: the command's,
128+N if a signal N ended it, 124 on timeout, 125 if the sandbox failed,
126/127 if the command could not be executed or found.

--settings takes Anthropic srt's settings file (network.allowedDomains,
filesystem.denyRead, ...) or srt-mcp's snake_case form; unknown keys are errors.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "settings", Usage: "srt-format settings `FILE`"},
		&cli.StringSliceFlag{Name: "allow-domain", Usage: "allow network access to `DOMAIN` (repeatable; *.x.com for subdomains, host:port)"},
		&cli.StringSliceFlag{Name: "deny-domain", Usage: "deny `DOMAIN` even if allowed (repeatable)"},
		&cli.StringSliceFlag{Name: "allow-ip-range", Usage: "let allowed names resolve to `CIDR` (loopback/private ranges are refused otherwise)"},
		&cli.StringSliceFlag{Name: "resolve", Usage: "pin `HOST=IP` for the proxy, like curl --resolve (repeatable)"},
		&cli.StringSliceFlag{Name: "allow-read", Usage: "make `PATH` readable (repeatable)"},
		&cli.StringSliceFlag{Name: "deny-read", Usage: "hide `PATH` (repeatable)"},
		&cli.StringSliceFlag{Name: "allow-write", Usage: "make `PATH` writable (repeatable; . for the working directory)"},
		&cli.StringSliceFlag{Name: "deny-write", Usage: "keep `PATH` read-only inside writable paths (repeatable)"},
		&cli.StringFlag{Name: "cwd", Usage: "working `DIR` (default: the current directory)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `K=V` in the sandbox (repeatable); nothing else of your environment is passed"},
		&cli.DurationFlag{Name: "timeout", Usage: "kill the command after `DUR` (e.g. 30s); exit 124"},
		&cli.StringFlag{Name: "max-memory", Usage: "memory limit, e.g. `512M` or 2G"},
		&cli.IntFlag{Name: "max-procs", Usage: "process limit `N`"},
		&cli.StringFlag{Name: "max-output", Usage: "cap each of stdout and stderr at `SIZE`"},
		&cli.StringFlag{Name: "max-file-size", Usage: "largest file the command may write, `SIZE`"},
		&cli.BoolFlag{Name: "pty", Usage: "run the command on a pseudo-terminal"},
		&cli.BoolFlag{Name: "json", Usage: "print the event stream as NDJSON instead of passing output through"},
		sandboxUserFlag,
		&cli.StringFlag{Name: "init", Hidden: true, Usage: "\"srt\": use srt-mcp's own PID 1 even where Landlock is available (tests the fallback)"},
	},
	Action: runExec,
}

func runExec(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return cli.Exit("exec needs a command: srt-mcp exec [flags] -- CMD [ARGS...]", exitUsage)
	}
	runner.Trace("cli")
	spec, err := execSpec(c, argv)
	runner.Trace("spec")
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	jsonOut := c.Bool("json")
	enc := json.NewEncoder(os.Stdout)
	sink := func(e runner.Event) {
		if jsonOut {
			_ = enc.Encode(e)
			return
		}
		switch e.Type {
		case runner.EventStdout:
			_, _ = os.Stdout.Write(e.Data)
		case runner.EventStderr:
			_, _ = os.Stderr.Write(e.Data)
		case runner.EventViolation:
			// Pass-through mode reports refusals only; --json has all.
			if e.Violation != nil && e.Violation.Decision == "deny" {
				fmt.Fprintln(os.Stderr, "srt-mcp:", describeViolation(e.Violation))
			}
		}
	}
	stdinTTY := term.IsTerminal(int(os.Stdin.Fd()))
	if spec.Stdin == runner.StdinPTY && stdinTTY {
		if w, h, err := term.GetSize(int(os.Stdin.Fd())); err == nil {
			spec.Cols, spec.Rows = uint16(w), uint16(h)
		}
	}
	opts := runner.Options{Egress: netproxy.Egress}
	if spec.Stdin == runner.StdinPipe {
		opts.Stdin = os.Stdin
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	run, _ := runner.Start(context.Background(), *spec, sink, opts)
	go func() {
		for s := range sigs {
			_ = run.Signal(s.(syscall.Signal))
		}
	}()
	if spec.Stdin == runner.StdinPTY {
		if stdinTTY {
			if old, err := term.MakeRaw(int(os.Stdin.Fd())); err == nil {
				defer term.Restore(int(os.Stdin.Fd()), old)
			}
			watchWinch(run)
		}
		go func() {
			_, _ = io.Copy(run, os.Stdin)
			if !stdinTTY {
				_ = run.CloseStdin()
			}
		}()
	}
	end := run.Wait()
	code := exitCodeFor(end, !jsonOut)
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// exitCodeFor maps the terminal event to srt-mcp exec's exit status, and
// says why on stderr when the command did not decide it.
func exitCodeFor(e runner.Event, say bool) int {
	msg := ""
	code := 0
	switch e.Type {
	case runner.EventExit:
		code = e.ExitCode
	case runner.EventTimeout:
		code, msg = exitTimeout, fmt.Sprintf("timed out after %gs", e.TimeoutSeconds)
	case runner.EventCancelled:
		code, msg = 128+int(syscall.SIGTERM), "cancelled"
	case runner.EventError:
		code, msg = exitSandboxError, e.ErrCode+": "+e.Message
		switch e.ErrCode {
		case runner.ErrCodeNotFound:
			code = exitNotFound
		case runner.ErrCodeNotExecutable:
			code = exitNotExec
		}
	}
	if len(e.Truncated) > 0 && say {
		fmt.Fprintf(os.Stderr, "srt-mcp: output truncated at --max-output (%s)\n", strings.Join(e.Truncated, ", "))
	}
	if msg != "" && say {
		fmt.Fprintln(os.Stderr, "srt-mcp:", msg)
	}
	return code
}

func describeViolation(v *runner.Violation) string {
	if v == nil {
		return "violation"
	}
	switch {
	case v.Kind == "network" && v.Reason != "":
		return fmt.Sprintf("network %s %s:%d: %s (%s)", v.Decision, v.Host, v.Port, v.Reason, v.Rule)
	case v.Kind == "network":
		return fmt.Sprintf("network %s %s:%d (%s)", v.Decision, v.Host, v.Port, v.Rule)
	case v.Kind == "request":
		return fmt.Sprintf("request %s %s %s:%d%s (%s)", v.Decision, v.Method, v.Host, v.Port, v.Path, v.Rule)
	}
	return fmt.Sprintf("%s: %s (%s)", v.Path, v.Action, v.Rule)
}

// execSpec builds the runner spec from the profile, the settings file and
// the flags, in that order.
func execSpec(c *cli.Context, argv []string) (*runner.Spec, error) {
	p, add, err := policyFromFlags(c, "exec")
	if err != nil {
		return nil, err
	}
	add.Limits.Timeout = policy.Duration(c.Duration("timeout"))
	add.Limits.MaxProcesses = c.Int("max-procs")
	for flag, dst := range map[string]*int64{"max-memory": &add.Limits.MaxMemoryBytes, "max-output": &add.Limits.MaxOutputBytes, "max-file-size": &add.Limits.MaxFileSizeBytes} {
		if s := c.String(flag); s != "" {
			n, err := parseSize(s)
			if err != nil {
				return nil, fmt.Errorf("--%s %q: %v", flag, s, err)
			}
			*dst = n
		}
	}
	p = policy.Merge(p, add)
	if err := p.Validate(); err != nil {
		return nil, flagError(err)
	}
	// The physical working directory (what the kernel says, not $PWD): a
	// path with no links in it, which the policy's "." then means.
	wd, err := syscall.Getwd()
	if err != nil {
		return nil, err
	}
	cwd := wd
	if d := c.String("cwd"); d != "" {
		cwd = d
		if !filepath.IsAbs(cwd) {
			cwd = filepath.Join(wd, cwd)
		}
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--cwd %q: no such directory", d)
		}
	}
	env := map[string]string{}
	for _, kv := range c.StringSlice("env") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: use NAME=VALUE", kv)
		}
		env[k] = v
	}
	home, _ := os.UserHomeDir()
	stdin := runner.StdinPipe
	if c.Bool("pty") {
		stdin = runner.StdinPTY
	}
	user, err := sandboxUser(c)
	if err != nil {
		return nil, err
	}
	// The interception CA is kept in the caller's private cache directory
	// (the trust bundle built from it is then the same run after run);
	// masked credentials are read from srt-mcp exec's own environment.
	caDir := ""
	if root, err := runner.CacheRoot(""); err == nil && root != "" {
		caDir = filepath.Join(root, "egress-ca")
	}
	material, err := runner.NewEgressMaterial(p, caDir, os.LookupEnv, home)
	if err != nil {
		return nil, flagError(err)
	}
	return &runner.Spec{
		Version: runner.SpecVersion, ID: uuid.NewString(), Argv: argv, Cwd: cwd, Home: home,
		Env: env, Policy: p, Stdin: stdin, Init: c.String("init"), User: user, Egress: material,
	}, nil
}

// flagError words a policy error in terms of the flag that carries it.
func flagError(err error) error {
	pe, ok := err.(*policy.Error)
	if !ok {
		return err
	}
	return fmt.Errorf("%s (%s)", pe.Detail(), pe.Code)
}

// parseSize reads "512M", "2G", "1048576", "64k".
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "IB"), "B")
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult, s = 1<<10, s[:len(s)-1]
		case 'M':
			mult, s = 1<<20, s[:len(s)-1]
		case 'G':
			mult, s = 1<<30, s[:len(s)-1]
		case 'T':
			mult, s = 1<<40, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size; use a number with an optional K, M, G suffix")
	}
	return int64(n * float64(mult)), nil
}
