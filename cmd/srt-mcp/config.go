//go:build !embedserver

package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/server"
	"github.com/srt-mcp/srt-mcp/settings"
)

// The settings file of srt-mcp serve (--config FILE) is read and checked
// by package settings; what needs urfave/cli's *cli.Context stays here:
// setting the flags it names, and computing the ceiling a start with a new
// reading would make.

// configFile is one reading of the settings file.
type configFile struct {
	*settings.File
}

// readConfig reads and checks path against the flags of serve.
func readConfig(path string, flags []cli.Flag) (*configFile, error) {
	f, err := settings.Read(path, flagNames(flags))
	if err != nil {
		return nil, err
	}
	return &configFile{File: f}, nil
}

// flagNames are the long names of flags, the keys a settings file may use.
func flagNames(flags []cli.Flag) []string {
	names := make([]string, 0, len(flags))
	for _, fl := range flags {
		names = append(names, fl.Names()[0])
	}
	return names
}

// apply sets every flag the file names that neither the command line nor
// the environment set.
func (cf *configFile) apply(c *cli.Context) error {
	if cf == nil {
		return nil
	}
	return cf.File.Apply(c.IsSet, c.Set)
}

// ceilingFromArgs computes the ceiling that serve's arguments (as given on
// the command line, with the environment) and cf make, the way a start
// with them would, without touching the running server's flags.
func ceilingFromArgs(args []string, flags []cli.Flag, cf *configFile) (policy.Policy, error) {
	var out policy.Policy
	var outErr error
	app := &cli.App{
		Name: "srt-mcp", Writer: io.Discard, ErrWriter: io.Discard, HideHelp: true, HideVersion: true,
		Flags:          flags,
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			if outErr = cf.apply(c); outErr == nil {
				out, outErr = serveCeiling(c, cf)
			}
			return nil
		},
	}
	if err := app.Run(append([]string{"srt-mcp"}, args...)); err != nil {
		return out, err
	}
	return out, outErr
}

// serveArgs are the arguments after "serve" on this process's command line.
func serveArgs() []string {
	if i := slices.Index(os.Args, "serve"); i >= 0 {
		return os.Args[i+1:]
	}
	return nil
}

// reloadSettings is what the server needs to reload the ceiling when the
// settings file changes (server.Settings, settings.Watch): each new
// reading's ceiling is computed from this process's serve arguments with
// it, as a restart would.
func reloadSettings(cf *configFile, flags []cli.Flag) *server.Settings {
	return &server.Settings{File: cf.File, Keys: flagNames(flags), Ceiling: func(next *settings.File) (policy.Policy, error) {
		return ceilingFromArgs(serveArgs(), flags, &configFile{File: next})
	}}
}

// serveCeiling builds the operator's ceiling from the serve profile, a
// settings file, and the flags.
func serveCeiling(c *cli.Context, cf *configFile) (policy.Policy, error) {
	p, add, err := policyFromFlags(c, "serve")
	if err != nil {
		return p, err
	}
	if cf != nil && cf.Policy != nil {
		p = policy.Merge(p, *cf.Policy) // after --settings, before the flags
	}
	for _, p := range append(append([]string{}, add.Filesystem.AllowRead...), add.Filesystem.AllowWrite...) {
		if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~") {
			return policy.Policy{}, fmt.Errorf("--allow-read/--allow-write %q: the server has no meaningful working directory; give an absolute path", p)
		}
	}
	add.Limits.Timeout = policy.Duration(time.Duration(c.Float64("max-timeout") * float64(time.Second)))
	add.Limits.MaxProcesses = c.Int("max-procs")
	for flag, dst := range map[string]*int64{"max-memory": &add.Limits.MaxMemoryBytes, "max-output": &add.Limits.MaxOutputBytes} {
		n, err := parseSize(c.String(flag))
		if err != nil {
			return p, fmt.Errorf("--%s %q: %v", flag, c.String(flag), err)
		}
		*dst = n
	}
	p = policy.Merge(p, add)
	return p, p.Validate()
}
