// Package profiles holds srt-mcp's named, embedded policies: the defaults a
// command starts from before a settings file, flags, or an MCP call narrow or
// extend them. Each profile is a settings file in the same format users
// write (see policy.ParseSettings), so every built-in default is readable
// in one place and validated like user input.
package profiles

import (
	"embed"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/srt-mcp/srt-mcp/policy"
)

//go:embed *.json
var files embed.FS

// Get returns the named profile's policy.
func Get(name string) (policy.Policy, error) {
	data, err := files.ReadFile(name + ".json")
	if err != nil {
		return policy.Policy{}, fmt.Errorf("unknown profile %q (available: %s)", name, strings.Join(Names(), ", "))
	}
	p, err := policy.ParseSettings(data)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("built-in profile %q: %w", name, err)
	}
	if !memoryLimitEnforceable {
		// macOS cannot bound memory and refuses any run that asks it to;
		// the built-in defaults do not ask (a limit the user sets still
		// fails closed).
		p.Limits.MaxMemoryBytes = 0
	}
	return p, nil
}

// memoryLimitEnforceable: every platform but macOS.
var memoryLimitEnforceable = runtime.GOOS != "darwin"

// Names lists the built-in profiles.
func Names() []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}
