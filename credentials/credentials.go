// Package credentials reads the operator's secrets (srt's credentials
// section) on the host, makes the stand-ins a sandbox sees in their place,
// and swaps one for the other on the way through the egress proxy: a
// stand-in becomes the real value only in a request to that entry's hosts,
// and a real value becomes its stand-in again in every response.
//
// A Secret's value lives in memory only: in the server or runner process
// and in the spec message between them. It is never written to a file,
// an event, a log line or an error; String and GoString print the name.
package credentials

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/policy"
)

// Secret is one masked entry with its value.
type Secret struct {
	// Name is the variable's name, or the file's path (as the settings
	// file spells it) for a file entry.
	Name string `json:"name"`
	// File is set for a file entry: the host path whose content is Value.
	File string `json:"file,omitempty"`
	// Value is the real value.
	Value string `json:"value"`
	// Standin is what the sandbox sees instead (minted by the runner when
	// empty).
	Standin string `json:"standin,omitempty"`
	// InjectHosts are the domain patterns Value may be sent to.
	InjectHosts []string `json:"inject_hosts"`
	// InjectBody: the value may go into request bodies too (see
	// policy.CredentialEnv.InjectBody).
	InjectBody bool `json:"inject_body,omitempty"`
	// Suffix is a file's line ending after the value (not part of it:
	// a header cannot carry it); the stand-in file ends with it too.
	Suffix string `json:"suffix,omitempty"`
}

// MinValueBytes is the shortest value that may be masked: the proxy swaps
// a value back wherever it appears, so a sandbox that has an upstream
// echo guesses learns which one was the value; a short or guessable one
// must not be masked.
const MinValueBytes = 16

// String names the secret without its value (fmt's %v and %+v).
func (s Secret) String() string { return "credential " + s.Name }

// GoString names the secret without its value (fmt's %#v).
func (s Secret) GoString() string { return "credentials.Secret{" + s.Name + "}" }

// MaxFileBytes bounds a masked file's content: a credential, not a
// document.
const MaxFileBytes = 64 << 10

// Resolve reads the values of c's masked entries: variables through
// getenv, files (with "~" from home) without following a final symlink.
// A masked variable that is unset or empty, or a masked file that cannot
// be read, is an error naming it: a secret the operator declared is never
// silently sent as nothing. Deny entries need no value.
func Resolve(c *policy.Credentials, allowed []string, getenv func(string) (string, bool), home string) ([]Secret, error) {
	if c == nil {
		return nil, nil
	}
	var out []Secret
	hostsOf := func(h []string) []string {
		if h == nil {
			return append([]string(nil), allowed...)
		}
		return append([]string(nil), h...)
	}
	for i, e := range c.EnvVars {
		if e.Mode != policy.CredentialMask {
			continue
		}
		v, ok := getenv(e.Name)
		field := fmt.Sprintf("credentials.env_vars[%d]", i)
		if !ok || v == "" {
			return nil, &errs.Error{Code: errs.InvalidSettings, Field: field, Value: e.Name,
				Message: "the variable " + e.Name + " is masked but not set in srt-mcp's environment; set it, or remove the entry"}
		}
		if err := checkValue(field, e.Name, v); err != nil {
			return nil, err
		}
		out = append(out, Secret{Name: e.Name, Value: v, InjectHosts: hostsOf(e.InjectHosts), InjectBody: e.InjectBody})
	}
	for i, f := range c.Files {
		if f.Mode != policy.CredentialMask {
			continue
		}
		path := policy.ExpandPath(f.Path, "/", home)
		v, err := readFile(path)
		if err != nil {
			return nil, &errs.Error{Code: errs.InvalidSettings, Field: fmt.Sprintf("credentials.files[%d]", i), Value: f.Path,
				Message: "the masked file cannot be read: " + err.Error()}
		}
		value := strings.TrimRight(v, "\r\n")
		field := fmt.Sprintf("credentials.files[%d]", i)
		if err := checkValue(field, f.Path, value); err != nil {
			return nil, err
		}
		out = append(out, Secret{Name: f.Path, File: path, Value: value, Suffix: v[len(value):], InjectHosts: hostsOf(f.InjectHosts), InjectBody: f.InjectBody})
	}
	return out, nil
}

// checkValue refuses a value that cannot be masked safely: too short to
// be unguessable, or one that no request line or header could carry.
func checkValue(field, name, v string) error {
	bad := func(msg string) error {
		return &errs.Error{Code: errs.InvalidSettings, Field: field, Value: name, Message: name + ": " + msg}
	}
	if len(v) < MinValueBytes {
		return bad(fmt.Sprintf("the value is %d bytes; a masked value must be at least %d (a shorter one could be guessed from what the proxy swaps back); use mode \"deny\" for it", len(v), MinValueBytes))
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return bad("the value holds a line break or NUL, which no header can carry; mask a one-line secret")
	}
	return nil
}

func readFile(path string) (string, error) {
	// The operator's path: its directories are the operator's to trust; a
	// final link (one a tool might replace the file with) is not followed.
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(fd, MaxFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxFileBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	if len(b) == 0 {
		return "", errors.New("empty")
	}
	return string(b), nil
}

// StandinPrefix starts every stand-in, so a sandbox (and a reader of its
// output) can tell one for what it is.
const StandinPrefix = "srtmcp_masked_"

// standinAlphabet is what a stand-in is made of: letters and digits only,
// so it survives shells, URLs, JSON, headers and base64 padding alike.
var standinEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Mint makes a stand-in for a value: the prefix and 128 random bits,
// padded with more random characters to the value's length when the value
// is longer, so that swapping one for the other keeps a body's length (and
// its Content-Length) when it can.
func Mint(value string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s := StandinPrefix + standinEncoding.EncodeToString(b)
	if pad := len(value) - len(s); pad > 0 {
		extra := make([]byte, (pad*5+7)/8+1)
		_, _ = rand.Read(extra)
		s += standinEncoding.EncodeToString(extra)[:pad]
	}
	return s
}

// MintAll fills every empty Standin.
func MintAll(ss []Secret) {
	for i := range ss {
		if ss[i].Standin == "" {
			ss[i].Standin = Mint(ss[i].Value)
		}
	}
}

// Env returns the sandbox's view of the operator's variables: a masked
// variable's stand-in; denied variables are listed in deny so that a
// caller passing its own environment (srt-mcp exec) drops them.
func Env(c *policy.Credentials, ss []Secret) (set map[string]string, deny []string) {
	set = map[string]string{}
	if c == nil {
		return set, nil
	}
	byName := map[string]Secret{}
	for _, s := range ss {
		if s.File == "" {
			byName[s.Name] = s
		}
	}
	for _, e := range c.EnvVars {
		if s, ok := byName[e.Name]; ok && e.Mode == policy.CredentialMask {
			set[e.Name] = s.Standin
			continue
		}
		deny = append(deny, e.Name)
	}
	return set, deny
}
