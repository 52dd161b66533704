// Package settings reads the settings file of srt-mcp serve (--config
// FILE): one JSON object whose keys are serve's flag names with their
// values (a string, number or boolean; a list for repeatable flags), and
// srt's settings keys "network" and "filesystem" for the ceiling:
//
//	{"allow-domain": ["pypi.org", "files.pythonhosted.org"], "max-timeout": 600,
//	 "drain-timeout": "20s", "filesystem": {"denyWrite": ["~/.ssh"]}}
//
// The command line and the environment win over the file. The ceiling
// (what any call may ask for: the network allow-list, host paths, limits)
// is reloaded when the file changes (Watch): executions that start
// afterwards get the new one. A file that does not parse, names an unknown
// key or makes an invalid ceiling is refused with the error logged, and
// the settings in force stay. Other keys take effect at the next start
// (the log says so).
//
// The package knows the flags by name only: the command line parser
// (urfave/cli in cmd/srt-mcp) hands it their names and applies the values
// through callbacks.
package settings

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/srt-mcp/srt-mcp/opfile"
	"github.com/srt-mcp/srt-mcp/policy"
)

// MaxBytes bounds the settings file.
const MaxBytes = 1 << 20

// ceilingKeys are the flags that make the ceiling: a reload applies them
// (and srt's "network" and "filesystem", which are always the ceiling's).
var ceilingKeys = []string{"allow-domain", "deny-domain", "allow-ip-range", "resolve", "allow-read", "allow-write",
	"max-timeout", "max-procs", "max-memory", "max-output", "settings"}

// IsCeilingKey reports whether a reload applies the flag key; the others
// take effect at the next start.
func IsCeilingKey(key string) bool { return slices.Contains(ceilingKeys, key) }

// File is one reading of the settings file.
type File struct {
	// Path is where it was read from.
	Path string
	// Flags maps a serve flag's long name to its values (one each for a
	// repeatable flag), as the command line would give them.
	Flags map[string][]string
	// Policy is srt's "network" and "filesystem" keys, parsed as an srt
	// settings file; nil when the file has neither.
	Policy *policy.Policy
	// sum tells a reading that changed from one that did not (an editor
	// that writes the same bytes again is no reload).
	sum [32]byte
}

// Read reads the settings file at path (refused unless only its owner,
// root or this process's user, may write it: see opfile) and checks it
// against flags, the long names of serve's flags.
func Read(path string, flags []string) (*File, error) {
	data, err := opfile.ReadServerFile(path, MaxBytes)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, flags)
}

// Parse checks data, the content of the settings file at path, against
// flags, the long names of serve's flags. Errors name path and the key.
func Parse(path string, data []byte, flags []string) (*File, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil || top == nil {
		return nil, fmt.Errorf("%s is not one JSON object: %v", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s holds more than one JSON value", path)
	}
	known := map[string]bool{}
	for _, name := range flags {
		known[name] = true
	}
	f := &File{Path: path, Flags: map[string][]string{}, sum: sha256.Sum256(data)}
	srt := map[string]json.RawMessage{}
	// In key order, so that a file with several faults is always refused
	// for the same one.
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := top[k]
		switch {
		case k == "network" || k == "filesystem":
			srt[k] = v
		case k == "config":
			return nil, fmt.Errorf("%s: a settings file cannot name another (key \"config\")", path)
		case known[k]:
			vals, err := Values(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %v", path, k, err)
			}
			f.Flags[k] = vals
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
		f.Policy = &p
	}
	return f, nil
}

// Values turns one value of the file into flag values: a string, number
// or boolean is one; a list of them is one each.
func Values(raw json.RawMessage) ([]string, error) {
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

// Apply sets every flag the file names that neither the command line nor
// the environment set (isSet), in name order, through set; a value set
// refuses is an error naming the file and the key. A nil File sets none.
func (f *File) Apply(isSet func(name string) bool, set func(name, value string) error) error {
	if f == nil {
		return nil
	}
	names := make([]string, 0, len(f.Flags))
	for k := range f.Flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if isSet(name) {
			continue
		}
		for _, v := range f.Flags[name] {
			if err := set(name, v); err != nil {
				return fmt.Errorf("%s: %q: %v", f.Path, name, err)
			}
		}
	}
	return nil
}

// ChangedKeys lists the flag keys whose values differ between two
// readings, sorted.
func ChangedKeys(a, b *File) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range []map[string][]string{a.Flags, b.Flags} {
		for k := range m {
			if !seen[k] && !slices.Equal(a.Flags[k], b.Flags[k]) {
				out = append(out, k)
			}
			seen[k] = true
		}
	}
	sort.Strings(out)
	return out
}
