package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/opfile"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/profiles"
	"github.com/srt-mcp/srt-mcp/runner"
)

// maxSettingsBytes bounds an srt settings file (--settings), as
// settings.MaxBytes bounds serve's --config: a constant of its own, so that
// exec in the light build does not link the settings package's watcher.
const maxSettingsBytes = 1 << 20

// policyFromFlags builds a policy the way exec and serve both do: the named
// built-in profile, then --settings, then the flags they share (domains,
// address ranges, pinned hosts, paths). The caller adds its own limits.
func policyFromFlags(c *cli.Context, profile string) (policy.Policy, policy.Policy, error) {
	p, err := profiles.Get(profile)
	if err != nil {
		return p, policy.Policy{}, err
	}
	if f := c.String("settings"); f != "" {
		read := opfile.Read
		if profile == "serve" {
			read = opfile.ReadServerFile // the ceiling of a server, which trusts it as long as it runs
		}
		data, err := read(f, maxSettingsBytes)
		if err != nil {
			return p, policy.Policy{}, fmt.Errorf("--settings: %v", err)
		}
		sp, err := policy.ParseSettings(data)
		if err != nil {
			return p, policy.Policy{}, fmt.Errorf("--settings %s: %v", f, err)
		}
		p = policy.Merge(p, sp)
	}
	var add policy.Policy
	add.Network.AllowedDomains = c.StringSlice("allow-domain")
	add.Network.DeniedDomains = c.StringSlice("deny-domain")
	add.Network.AllowedIPRanges = c.StringSlice("allow-ip-range")
	for _, kv := range c.StringSlice("resolve") {
		host, ip, ok := strings.Cut(kv, "=")
		if !ok || host == "" {
			return p, add, fmt.Errorf("--resolve %q: use HOST=IP", kv)
		}
		if add.Network.Hosts == nil {
			add.Network.Hosts = map[string]string{}
		}
		add.Network.Hosts[host] = ip
	}
	add.Filesystem.AllowRead = c.StringSlice("allow-read")
	add.Filesystem.AllowWrite = c.StringSlice("allow-write")
	add.Filesystem.DenyRead = c.StringSlice("deny-read") // exec only; nil for serve
	add.Filesystem.DenyWrite = c.StringSlice("deny-write")
	return p, add, nil
}

// sandboxUserFlag names the unprivileged host user a root srt-mcp runs
// its sandboxes as.
var sandboxUserFlag = &cli.StringFlag{Name: "sandbox-user", EnvVars: []string{"SANDBOX_USER"},
	Usage: "as root, run sandboxes as `USER` (a name, NAME:GROUP, UID or UID:GID; never root). Default: 65532:65532, an id no account uses"}

// sandboxUser reads --sandbox-user; nil means the runner's default.
func sandboxUser(c *cli.Context) (*runner.SandboxUser, error) {
	u, err := runner.ParseSandboxUser(c.String("sandbox-user"))
	if err != nil {
		return nil, cli.Exit("--sandbox-user: "+err.Error(), exitUsage)
	}
	return &u, nil
}
