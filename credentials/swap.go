package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/srt-mcp/srt-mcp/policy"
)

// Pair is one swap: Old becomes New. Derived marks a value's other
// spelling (JSON-escaped, URL-encoded, hex, base64): what an upstream's
// text (an API's JSON) may hand back.
type Pair struct {
	Old, New []byte
	Derived  bool
}

// Plain keeps the pairs that are not Derived: enough for a binary body,
// whose bytes an upstream does not re-spell.
func Plain(pairs []Pair) []Pair {
	var out []Pair
	for _, p := range pairs {
		if !p.Derived {
			out = append(out, p)
		}
	}
	return out
}

// Swapper holds one run's secrets for the proxy.
type Swapper struct {
	secrets []Secret
	hosts   [][]policy.Pattern
	redact  []Pair // real → stand-in, every secret
}

// NewSwapper compiles secrets (stand-ins minted) for the proxy.
func NewSwapper(ss []Secret) *Swapper {
	w := &Swapper{secrets: ss}
	for _, s := range ss {
		var ps []policy.Pattern
		for _, h := range s.InjectHosts {
			if p, err := policy.ParsePattern(h, false); err == nil {
				ps = append(ps, p)
			}
		}
		w.hosts = append(w.hosts, ps)
		w.redact = append(w.redact, derivedPairs(s.Value, s.Standin)...)
	}
	return w
}

// minForm is the shortest derived form looked for: shorter ones would be
// found in unrelated bytes.
const minForm = 16

// derivedPairs are the spellings in which an upstream may hand a value
// back, each with the same spelling of the stand-in: as is, JSON-escaped
// (with and without "\/"), URL-encoded (query and path), hex (both
// cases), and base64 and base64url at each of the three alignments a
// value can have inside longer data (the characters that depend on the
// value alone).
func derivedPairs(value, standin string) []Pair {
	var out []Pair
	seen := map[string]bool{}
	add := func(v, s string) {
		if len(v) >= minForm && !seen[v] {
			seen[v] = true
			out = append(out, Pair{Old: []byte(v), New: []byte(s), Derived: len(out) > 0})
		}
	}
	add(value, standin)
	jsonEsc := func(x string) string {
		b, _ := json.Marshal(x)
		return string(b[1 : len(b)-1])
	}
	add(jsonEsc(value), jsonEsc(standin))
	add(strings.ReplaceAll(jsonEsc(value), "/", `\/`), strings.ReplaceAll(jsonEsc(standin), "/", `\/`))
	add(url.QueryEscape(value), url.QueryEscape(standin))
	add(strings.ReplaceAll(value, "+", " "), standin) // a raw '+' read back from a query
	add(url.PathEscape(value), url.PathEscape(standin))
	add(hex.EncodeToString([]byte(value)), hex.EncodeToString([]byte(standin)))
	add(strings.ToUpper(hex.EncodeToString([]byte(value))), strings.ToUpper(hex.EncodeToString([]byte(standin))))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for a := 0; a < 3; a++ {
			add(base64Core(enc, a, value), base64Core(enc, a, standin))
		}
	}
	return out
}

// base64Core is the part of x's base64 encoding, after a bytes of other
// data, that depends on x's bytes alone.
func base64Core(enc *base64.Encoding, a int, x string) string {
	buf := append(make([]byte, a), x...)
	e := enc.EncodeToString(buf)
	from, to := (8*a+5)/6, (8*len(buf))/6
	if to <= from {
		return ""
	}
	return e[from:to]
}

// Secrets returns the secrets (for redacting a message).
func (w *Swapper) Secrets() []Secret {
	if w == nil {
		return nil
	}
	return w.secrets
}

// RedactPairs swaps every real value back to its stand-in.
func (w *Swapper) RedactPairs() []Pair {
	if w == nil {
		return nil
	}
	return w.redact
}

// Empty reports whether there is nothing to swap.
func (w *Swapper) Empty() bool { return w == nil || len(w.secrets) == 0 }

// BodyInjection reports whether any secret may go into request bodies.
func (w *Swapper) BodyInjection() bool {
	if w == nil {
		return false
	}
	for _, s := range w.secrets {
		if s.InjectBody {
			return true
		}
	}
	return false
}

// InjectableAt reports whether any secret may be sent to host:port.
func (w *Swapper) InjectableAt(host string, port int) bool {
	return len(w.forHost(host, port)) > 0
}

// forHost returns the indexes of the secrets whose inject hosts cover
// host:port.
func (w *Swapper) forHost(host string, port int) []int {
	if w.Empty() {
		return nil
	}
	h, err := policy.CanonicalHost(host)
	if err != nil {
		return nil
	}
	var out []int
	for i, ps := range w.hosts {
		for _, p := range ps {
			if p.Match(h, port) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// Injection is what one request's swap did.
type Injection struct {
	// Names of the secrets put into the request.
	Names []string
	// Body swaps stand-ins in the request body (nil: none apply here);
	// BodyNames[i] names Body[i]'s secret.
	Body      []Pair
	BodyNames []string
	// Redact is every swap to undo in the response: each secret's real
	// value and any encoded form this request carried (a Basic
	// credential's base64).
	Redact []Pair
	// SameLength reports whether every body swap keeps the length.
	SameLength bool
}

// InjectRequest puts the real values of the secrets that may go to
// host:port into r's headers (a Basic credential's decoded user:password
// too) and query, and returns what it did with the body swaps still to
// apply. Another secret's stand-in is left as it is: it is worthless
// anywhere but its own hosts.
func (w *Swapper) InjectRequest(r *http.Request, host string, port int) Injection {
	inj := Injection{SameLength: true}
	if w.Empty() {
		return inj
	}
	inj.Redact = w.redact
	idx := w.forHost(host, port)
	if len(idx) == 0 {
		return inj
	}
	used := map[int]bool{}
	swap := func(s string) string {
		if !strings.Contains(s, StandinPrefix) {
			return s
		}
		for _, i := range idx {
			sec := w.secrets[i]
			if strings.Contains(s, sec.Standin) {
				s = strings.ReplaceAll(s, sec.Standin, sec.Value)
				used[i] = true
			}
		}
		return s
	}
	var extra []Pair
	for k, vs := range r.Header {
		for j, v := range vs {
			nv := swap(v)
			if fold := strings.ToLower(k); fold == "authorization" || fold == "proxy-authorization" {
				if scheme, cred, ok := strings.Cut(nv, " "); ok && strings.EqualFold(scheme, "basic") {
					if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
						if dec := swap(string(raw)); dec != string(raw) {
							enc := base64.StdEncoding.EncodeToString([]byte(dec))
							extra = append(extra, Pair{Old: []byte(enc), New: []byte(strings.TrimSpace(cred))})
							nv = scheme + " " + enc
						}
					}
				}
			}
			vs[j] = nv
		}
	}
	if r.URL != nil && r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, StandinPrefix) {
		// In a query the value goes URL-encoded: a '+' or '&' in it must
		// arrive as itself.
		q := r.URL.RawQuery
		for _, i := range idx {
			sec := w.secrets[i]
			if strings.Contains(q, sec.Standin) {
				q = strings.ReplaceAll(q, sec.Standin, url.QueryEscape(sec.Value))
				used[i] = true
			}
		}
		r.URL.RawQuery = q
	}
	for _, i := range idx {
		sec := w.secrets[i]
		if !sec.InjectBody {
			continue
		}
		inj.Body = append(inj.Body, Pair{Old: []byte(sec.Standin), New: []byte(sec.Value)})
		inj.BodyNames = append(inj.BodyNames, sec.Name)
		if len(sec.Standin) != len(sec.Value) {
			inj.SameLength = false
		}
	}
	for i := range w.secrets {
		if used[i] {
			inj.Names = append(inj.Names, w.secrets[i].Name)
		}
	}
	if len(extra) > 0 {
		inj.Redact = append(append([]Pair(nil), extra...), w.redact...)
	}
	return inj
}

// RedactAll swaps every pair in b (a message, not a stream).
func RedactAll(pairs []Pair, b []byte) []byte {
	out, _ := io.ReadAll(NewReader(bytes.NewReader(b), pairs, nil))
	return out
}

// RedactHeader swaps real values back to stand-ins in every value of h.
func RedactHeader(h http.Header, pairs []Pair) {
	if len(pairs) == 0 {
		return
	}
	for k, vs := range h {
		for j, v := range vs {
			for _, p := range pairs {
				if len(p.Old) > 0 && strings.Contains(v, string(p.Old)) {
					v = strings.ReplaceAll(v, string(p.Old), string(p.New))
				}
			}
			h[k][j] = v
		}
	}
}

// GrowsOrShrinks reports whether any pair changes length.
func GrowsOrShrinks(pairs []Pair) bool {
	for _, p := range pairs {
		if len(p.Old) != len(p.New) {
			return true
		}
	}
	return false
}

// NewReader returns r with every Old of pairs replaced by its New, also
// across read boundaries. With no pairs it returns r. onSwap, if set, is
// called with the index of each pair swapped.
func NewReader(r io.Reader, pairs []Pair, onSwap func(int)) io.Reader {
	var ps []Pair
	max := 0
	for _, p := range pairs {
		if len(p.Old) == 0 {
			continue
		}
		ps = append(ps, p)
		if len(p.Old) > max {
			max = len(p.Old)
		}
	}
	if len(ps) == 0 {
		return r
	}
	const chunk = 32 << 10
	return &swapReader{r: r, pairs: ps, keep: max - 1, onSwap: onSwap, in: make([]byte, 0, chunk+max), out: make([]byte, 0, chunk+max)}
}

// swapReader reads into in's spare capacity, moves what can no longer
// start a match to out (swapping whole matches), and hands out from out.
// Both buffers are reused: scanning a large response allocates nothing.
type swapReader struct {
	r      io.Reader
	pairs  []Pair
	keep   int // bytes held back: a match may start in them
	onSwap func(int)
	in     []byte // read, not yet swapped
	out    []byte // swapped, not yet returned
	off    int    // out[off:] is still to return
	err    error  // the source's error, once it is done
	next   []int  // process's per-pair next match
}

func (s *swapReader) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		if s.err != nil && len(s.in) == 0 {
			return 0, s.err
		}
		s.out, s.off = s.out[:0], 0
		if s.err == nil {
			if len(s.in) == cap(s.in) {
				s.in = append(s.in, 0)[:len(s.in)] // grow: one match longer than the buffer
			}
			n, err := s.r.Read(s.in[len(s.in):cap(s.in)])
			s.in = s.in[:len(s.in)+n]
			if err != nil {
				s.err = err
			}
		}
		s.process()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// process moves what can no longer be the start of a match from in to
// out, swapping whole matches. Each pair's next match is remembered and
// looked for again only once the scan has passed it: a buffer full of
// matches costs one pass per pair, not one per match.
func (s *swapReader) process() {
	safe := len(s.in) - s.keep
	if s.err != nil {
		safe = len(s.in)
	}
	if safe <= 0 {
		return
	}
	s.next = s.next[:0]
	for _, p := range s.pairs {
		s.next = append(s.next, indexFrom(s.in, p.Old, 0))
	}
	i := 0
	for i < safe {
		at, which := -1, -1
		for k, p := range s.pairs {
			if s.next[k] >= 0 && s.next[k] < i {
				s.next[k] = indexFrom(s.in, p.Old, i)
			}
			if n := s.next[k]; n >= 0 && (at < 0 || n < at) {
				at, which = n, k
			}
		}
		if at < 0 || at >= safe {
			s.out = append(s.out, s.in[i:safe]...)
			i = safe
			break
		}
		s.out = append(s.out, s.in[i:at]...)
		s.out = append(s.out, s.pairs[which].New...)
		if s.onSwap != nil {
			s.onSwap(which)
		}
		i = at + len(s.pairs[which].Old)
	}
	s.in = s.in[:copy(s.in, s.in[i:])]
}

// indexFrom is the index of sub in b at or after from, or -1.
func indexFrom(b, sub []byte, from int) int {
	if from > len(b) {
		return -1
	}
	j := bytes.Index(b[from:], sub)
	if j < 0 {
		return -1
	}
	return from + j
}
