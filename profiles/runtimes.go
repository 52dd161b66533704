package profiles

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/srt-mcp/srt-mcp/policy"
)

//go:embed runtimes/runtimes.json
var runtimesJSON []byte

// Runtime is one language execute_code can run (see runtimes/runtimes.json).
type Runtime struct {
	Language string   `json:"language"`
	Aliases  []string `json:"aliases"`
	File     string   `json:"file"`
	Tools    []string `json:"tools"`
	Version  []string `json:"version"`
	Compile  string   `json:"compile,omitempty"`
	Run      string   `json:"run"`
	Stateful bool     `json:"stateful,omitempty"`
	Packages []string `json:"packages"`

	// Discovered on the host.
	Available bool              `json:"available"`
	Reason    string            `json:"reason,omitempty"`
	Found     string            `json:"version_found,omitempty"`
	Paths     map[string]string `json:"-"`
}

// Runtimes is the registry, discovered from what the host has.
type Runtimes struct {
	list []*Runtime
	by   map[string]*Runtime
}

// toolDirs is where tools are looked for: the directories of the
// sandbox's system view, so that what is found is what a sandbox can run.
var toolDirs = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/go/bin", "/usr/lib/go/bin", "/usr/sbin", "/sbin"}

// DiscoverRuntimes reads the embedded registry and checks each runtime's
// tools on this host (inside the sandbox's system view) and their version.
//
// The version probes run with a scratch directory made under
// scratchParent (a private directory of the server's: never a shared
// /tmp), removed afterwards.
func DiscoverRuntimes(scratchParent string) (*Runtimes, error) {
	var doc struct {
		Runtimes []*Runtime `json:"runtimes"`
	}
	if err := json.Unmarshal(runtimesJSON, &doc); err != nil {
		return nil, fmt.Errorf("built-in runtimes: %w", err)
	}
	r := &Runtimes{by: map[string]*Runtime{}}
	// The version probes run the system's own tools on the host, with
	// nothing of the server's environment (its secrets included) and a
	// private scratch directory removed afterwards.
	scratch, err := os.MkdirTemp(scratchParent, "probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	var probes sync.WaitGroup
	defer probes.Wait() // before the scratch directory goes
	for _, rt := range doc.Runtimes {
		rt.Paths = map[string]string{}
		var missing, outside []string
		for _, tool := range rt.Tools {
			p := findTool(tool)
			if p == "" {
				if q, err := exec.LookPath(tool); err == nil {
					outside = append(outside, q)
				} else {
					missing = append(missing, tool)
				}
				continue
			}
			rt.Paths[tool] = p
		}
		switch {
		case len(outside) > 0:
			rt.Reason = fmt.Sprintf("%s is outside what sandboxes see (%s); install Debian's: apt-get install -y %s",
				strings.Join(outside, ", "), strings.Join(policy.SystemView, " "), strings.Join(rt.Packages, " "))
		case len(missing) > 0:
			rt.Reason = fmt.Sprintf("%s not installed; apt-get install -y %s", strings.Join(missing, ", "), strings.Join(rt.Packages, " "))
		default:
			rt.Available = true
			// The probes run at once: in turn they held a server's first
			// calls (which wait for discovery) ~0.8 s after a start.
			probes.Add(1)
			go func(rt *Runtime) {
				defer probes.Done()
				rt.Found = rt.versionOf(scratch)
			}(rt)
		}
		r.list = append(r.list, rt)
		r.by[rt.Language] = rt
		for _, a := range rt.Aliases {
			r.by[strings.ToLower(a)] = rt
		}
	}
	return r, nil
}

func findTool(name string) string {
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if real, err := filepath.EvalSymlinks(p); err == nil && inSystemView(real) {
				return p
			}
		}
	}
	return ""
}

func inSystemView(p string) bool {
	for _, v := range policy.SystemView {
		if policy.Within(p, v) {
			return true
		}
	}
	return false
}

func (rt *Runtime) versionOf(scratch string) string {
	if len(rt.Version) == 0 {
		return ""
	}
	argv := append([]string(nil), rt.Version...)
	if p := rt.Paths[argv[0]]; p != "" {
		argv[0] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// GOTOOLCHAIN=local: a go.mod another user planted above the state
	// directory (under /tmp, say) must not make `go version` fetch a
	// toolchain.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + scratch, "TMPDIR=" + scratch,
		"GOTOOLCHAIN=local", "GOWORK=off"}
	cmd.Dir = scratch
	// The probe dies with the server (a kill -9 during start-up), as the
	// runners do: its timeout died with it.
	cmd.SysProcAttr = dieWithParent()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// Get finds a runtime by language or alias (case-insensitive).
func (r *Runtimes) Get(lang string) (*Runtime, bool) {
	rt, ok := r.by[strings.ToLower(strings.TrimSpace(lang))]
	return rt, ok
}

// All lists the runtimes, in registry order.
func (r *Runtimes) All() []*Runtime { return r.list }

// Names lists every language name and alias, sorted.
func (r *Runtimes) Names() []string {
	var out []string
	for k := range r.by {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CompileFailedReport is the line the run script of a compiled language
// writes on its report fd (runner.Spec.Report, fd 3) when the compile step
// failed: a channel apart from the program's own exit status and output.
const CompileFailedReport = "compile_failed"

// Argv runs code with this runtime (see Script).
func (rt *Runtime) Argv(code string) []string {
	return []string{"/bin/bash", "-c", rt.Script(), "srt-run", code}
}

// Reports tells whether the run script speaks on a report fd (it does
// when the language has a compile step): the spec must ask for one.
func (rt *Runtime) Reports() bool { return rt.Compile != "" }

// CompileFailed reports whether a run's report line (the exit event's)
// says its compile step failed.
func (rt *Runtime) CompileFailed(report string) bool {
	return rt.Compile != "" && report == CompileFailedReport
}

// Script is the bash script that writes the code (its $1) to the runtime's
// file in a fresh directory, compiles it there if the language needs it,
// and runs it from the directory it was started in (the workspace).
func (rt *Runtime) Script() string {
	sub := func(s string) string {
		for tool, p := range rt.Paths {
			s = strings.ReplaceAll(s, "{"+tool+"}", p)
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, `w=$PWD; d=$(mktemp -d /tmp/run-XXXXXX) && cd "$d" && printf '%%s' "$1" > %s || exit 1; `, rt.File)
	if rt.Compile != "" {
		// The compile step does not get fd 3; the program neither: only
		// the script itself can say the compile failed.
		fmt.Fprintf(&b, `{ %s; } 3>&- || { { echo %s >&3; } 2>/dev/null; exit 1; }; exec 3>&-; `, sub(rt.Compile), CompileFailedReport)
	}
	b.WriteString(`cd "$w" || exit 1; `)
	b.WriteString(sub(rt.Run))
	return b.String()
}
