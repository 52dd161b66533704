// Package apikeys holds the operator's named API keys: each key is a
// principal of its own (its rate limit, quotas, audit lines, and what
// list_executions shows it). Keys come from a file the operator controls,
// one per line:
//
//	# NAME TOKEN            the token itself
//	# NAME sha256:HEX       or its SHA-256, so the file holds no secret
//	alice 3f9c1e0b7a5d4c2e8f6a1b0c9d8e7f6a
//	ci    sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// Only digests are kept in memory, and a presented token is compared with
// every key in constant time.
package apikeys

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/srt-mcp/srt-mcp/opfile"
)

// MinTokenLen is the shortest token a key file may hold in the clear.
const MinTokenLen = 16

// PrincipalPrefix starts every principal a named key gives.
const PrincipalPrefix = "key:"

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

type key struct {
	name   string
	digest [sha256.Size]byte
}

// Keys are named API keys.
type Keys struct {
	keys []key
}

// Len is how many keys there are.
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// Names lists the keys' names, in file order.
func (k *Keys) Names() []string {
	var out []string
	for _, x := range k.keys {
		out = append(out, x.name)
	}
	return out
}

// Check returns the principal of the key token is ("key:NAME"), comparing
// it with every key in constant time.
func (k *Keys) Check(token string) (string, bool) {
	if k == nil || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range k.keys {
		if subtle.ConstantTimeCompare(d[:], k.keys[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return PrincipalPrefix + k.keys[found].name, true
}

// Parse reads a key file's lines; errors name the line.
func Parse(r io.Reader) (*Keys, error) {
	k := &Keys{}
	seen := map[string]bool{}
	digests := map[[sha256.Size]byte]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want NAME TOKEN or NAME sha256:HEX", n)
		}
		name, secret := f[0], f[1]
		if !namePattern.MatchString(name) {
			return nil, fmt.Errorf("line %d: key name %q: use letters, digits, '.', '_' and '-' (at most 64)", n, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("line %d: key name %q appears twice", n, name)
		}
		seen[name] = true
		var d [sha256.Size]byte
		if h, ok := strings.CutPrefix(secret, "sha256:"); ok {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("line %d: key %q: sha256: must be followed by 64 hex digits", n, name)
			}
			copy(d[:], b)
		} else {
			if len(secret) < MinTokenLen {
				return nil, fmt.Errorf("line %d: key %q is shorter than %d characters; use a longer random token (e.g. openssl rand -hex 24)", n, name, MinTokenLen)
			}
			d = sha256.Sum256([]byte(secret))
		}
		if other, dup := digests[d]; dup {
			return nil, fmt.Errorf("line %d: key %q has the same token as %q", n, name, other)
		}
		digests[d] = name
		k.keys = append(k.keys, key{name: name, digest: d})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("no keys (lines of NAME TOKEN or NAME sha256:HEX)")
	}
	return k, nil
}

// Load reads the key file at path; it must be a file only its owner (root
// or this process's user) may write (see opfile): a key file others could
// edit would let them add keys of their own.
func Load(path string) (*Keys, error) {
	data, err := opfile.ReadServerFile(path, 1<<20)
	if err != nil {
		return nil, err
	}
	k, err := Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return k, nil
}
