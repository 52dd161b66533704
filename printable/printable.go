// Package printable makes text a sandbox or a caller chose safe to show a
// client: a file name a run created, a host name code asked the proxy for,
// a variable name an interpreter reports. Control characters (C0, DEL,
// C1), the Unicode direction overrides and isolates and the line and
// paragraph separators become visible escapes (\x1b, \u202e), and invalid
// UTF-8 bytes become \xNN: a terminal or a chat window showing the text
// shows text, not an instruction to retitle, clear or reorder itself.
package printable

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r changes how a terminal or a text renderer
// shows what follows it.
func Unsafe(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c ||
		r == 0x2028 || r == 0x2029
}

// Name is s with every unsafe character escaped; ok reports that s needed
// no escape (it is shown as it is).
func Name(s string) (safe string, ok bool) {
	if utf8.ValidString(s) && strings.IndexFunc(s, Unsafe) < 0 {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x100 && Unsafe(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case Unsafe(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String(), false
}

// String is s made safe to show.
func String(s string) string {
	safe, _ := Name(s)
	return safe
}

// JSON escapes, in encoded JSON, the unsafe characters json.Marshal leaves
// raw (C1 controls, direction overrides and isolates): the result is the
// same JSON value, safe to print.
func JSON(b []byte) []byte {
	if utf8.Valid(b) && !containsUnsafe(b) {
		return b
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x80 && Unsafe(r) {
			fmt.Fprintf(&out, "\\u%04x", r)
		} else {
			out.Write(b[i : i+size])
		}
		i += size
	}
	return []byte(out.String())
}

func containsUnsafe(b []byte) bool {
	for _, r := range string(b) {
		if r >= 0x80 && Unsafe(r) {
			return true
		}
	}
	return false
}
