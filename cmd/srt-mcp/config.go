package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/urfave/cli/v2"

	"github.com/srt-mcp/srt-mcp/opfile"
	"github.com/srt-mcp/srt-mcp/policy"
)

// The settings file of srt-mcp serve (--config FILE) is one JSON object.
// Its keys are serve's flag names with their values (a string, number or
// boolean; a list for repeatable flags), and srt's settings keys "network"
// and "filesystem" for the ceiling:
//
//	{"allow-domain": ["pypi.org", "files.pythonhosted.org"], "max-timeout": 600,
//	 "drain-timeout": "20s", "filesystem": {"denyWrite": ["~/.ssh"]}}
//
// The command line and the environment win over the file. The ceiling
// (what any call may ask for: the network allow-list, host paths, limits)
// is reloaded when the file changes: executions that start afterwards get
// the new one. A file that does not parse, names an unknown key or makes
// an invalid ceiling is refused with the error logged, and the settings in
// force stay. Other keys take effect at the next start (the log says so).

// maxConfigBytes bounds the settings file.
const maxConfigBytes = 1 << 20

// ceilingKeys are the flags that make the ceiling: a reload applies them
// (and srt's "network" and "filesystem", which are always the ceiling's).
var ceilingKeys = []string{"allow-domain", "deny-domain", "allow-ip-range", "resolve", "allow-read", "allow-write",
	"max-timeout", "max-procs", "max-memory", "max-output", "settings"}

// configFile is one reading of the settings file.
type configFile struct {
	path  string
	flags map[string][]string // serve flag name -> its values
	srt   *policy.Policy      // "network" and "filesystem"; nil when absent
	sum   [32]byte
}

// readConfig reads and checks path against the flags of serve.
func readConfig(path string, flags []cli.Flag) (*configFile, error) {
	data, err := opfile.Read(path, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil || top == nil {
		return nil, fmt.Errorf("%s is not one JSON object: %v", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s holds more than one JSON value", path)
	}
	known := map[string]bool{}
	for _, fl := range flags {
		known[fl.Names()[0]] = true
	}
	cf := &configFile{path: path, flags: map[string][]string{}, sum: sha256.Sum256(data)}
	srt := map[string]json.RawMessage{}
	for k, v := range top {
		switch {
		case k == "network" || k == "filesystem":
			srt[k] = v
		case k == "config":
			return nil, fmt.Errorf("%s: a settings file cannot name another (key \"config\")", path)
		case known[k]:
			vals, err := configValues(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %v", path, k, err)
			}
			cf.flags[k] = vals
		default:
			return nil, fmt.Errorf("%s: unknown key %q: use the long name of a srt-mcp serve flag (for example \"allow-domain\" or \"max-timeout\"), or srt's \"network\" and \"filesystem\"", path, k)
		}
	}
	if len(srt) > 0 {
		raw, _ := json.Marshal(srt)
		p, err := policy.ParseSettings(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		cf.srt = &p
	}
	return cf, nil
}

// configValues turns one value of the file into flag values: a string,
// number or boolean is one; a list of them is one each.
func configValues(raw json.RawMessage) ([]string, error) {
	one := func(v any) (string, error) {
		switch x := v.(type) {
		case string:
			return x, nil
		case json.Number:
			return x.String(), nil
		case bool:
			return strconv.FormatBool(x), nil
		}
		return "", fmt.Errorf("want a string, number, boolean or a list of them, got %s", bytes.TrimSpace(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if list, ok := v.([]any); ok {
		out := make([]string, 0, len(list))
		for _, e := range list {
			s, err := one(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := one(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

// apply sets every flag the file names that neither the command line nor
// the environment set.
func (cf *configFile) apply(c *cli.Context) error {
	if cf == nil {
		return nil
	}
	names := make([]string, 0, len(cf.flags))
	for k := range cf.flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if c.IsSet(name) {
			continue
		}
		for _, v := range cf.flags[name] {
			if err := c.Set(name, v); err != nil {
				return fmt.Errorf("%s: %q: %v", cf.path, name, err)
			}
		}
	}
	return nil
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

// watchConfig reloads the ceiling when the settings file changes, until ctx
// ends. It watches the file's directory, so that a file replaced by a
// rename (editors, Kubernetes ConfigMap volumes) is seen too.
func watchConfig(ctx context.Context, cf *configFile, flags []cli.Flag, logger *slog.Logger, apply func(policy.Policy)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(filepath.Dir(cf.path)); err != nil {
		w.Close()
		return err
	}
	go func() {
		defer w.Close()
		var settle <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				logger.Warn("settings file watch", "path", cf.path, "error", err)
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				// Any change in the directory: read the file again once it
				// has settled (a writer's several events become one reload).
				settle = time.After(100 * time.Millisecond)
			case <-settle:
				settle = nil
				next, err := readConfig(cf.path, flags)
				if err == nil && next.sum == cf.sum {
					continue
				}
				var p policy.Policy
				if err == nil {
					p, err = ceilingFromArgs(serveArgs(), flags, next)
				}
				if err != nil {
					logger.Error("settings file refused: the settings in force stay", "path", cf.path, "error", err.Error())
					continue
				}
				for _, k := range changedKeys(cf, next) {
					if !slices.Contains(ceilingKeys, k) {
						logger.Warn("settings file: this key takes effect at the next start", "path", cf.path, "key", k)
					}
				}
				apply(p)
				cf = next
				logger.Info("settings file reloaded: new executions get the new ceiling", "path", cf.path,
					"allowed_domains", p.Network.AllowedDomains, "denied_domains", p.Network.DeniedDomains)
			}
		}
	}()
	return nil
}

// changedKeys lists the keys whose values differ between two readings.
func changedKeys(a, b *configFile) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range []map[string][]string{a.flags, b.flags} {
		for k := range m {
			if !seen[k] && !slices.Equal(a.flags[k], b.flags[k]) {
				out = append(out, k)
			}
			seen[k] = true
		}
	}
	sort.Strings(out)
	return out
}
