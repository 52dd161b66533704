// Package printable makes text a sandbox or a caller chose safe to show a
// client: a file name a run created, a host name code asked the proxy for,
// a variable name an interpreter reports. Control characters (C0, DEL,
// C1), the Unicode direction overrides and isolates and the line and
// paragraph separators and every other format character (zero-width
// joiners, tag characters) become visible escapes (\x1b, \u202e,
// \U000e0041), a backslash becomes \\, and invalid UTF-8 bytes become
// \xNN: a terminal, a chat window or a model reading the text sees text,
// not an instruction to retitle, clear or reorder itself or a message
// hidden from the reader.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r would not be shown as itself: a control
// character (C0, DEL, C1) a terminal acts on, a format character (the
// direction overrides and isolates, zero-width spaces and joiners, the
// BOM, the soft hyphen, interlinear annotations, the tag characters that
// smuggle text a reader does not see but a model reads), a line or
// paragraph separator; or the backslash, so that an escape is never
// mistaken for a name that spells one.
func Unsafe(r rune) bool {
	return r == '\\' || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == 0x180e
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
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x100 && Unsafe(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r > 0xffff && Unsafe(r):
			fmt.Fprintf(&b, "\\U%08x", r)
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
// raw (C1 controls, format characters): the result is the same JSON
// value, safe to print.
func JSON(b []byte) []byte {
	if utf8.Valid(b) && !containsUnsafe(b) {
		return b
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r > 0xffff && Unsafe(r): // a surrogate pair in JSON
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, "\\u%04x\\u%04x", r1, r2)
		case r >= 0x80 && Unsafe(r):
			fmt.Fprintf(&out, "\\u%04x", r)
		default:
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
