package printable

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"chart.png":                     "chart.png",
		"données.csv":                   "données.csv",
		"rt\x1b]0;PWNED\x07\x1b[2J.txt": `rt\x1b]0;PWNED\x07\x1b[2J.txt`,
		"evil\u202etxt.exe":             `evil\u202etxt.exe`,
		"a\u0085b":                      `a\x85b`,
		"\xff.csv":                      `\xff.csv`,
		"line\u2028sep":                 `line\u2028sep`,
		"iso\u2066late":                 `iso\u2066late`,
		"zw\u200dj\ufeffb\u00ad":        `zw\u200dj\ufeffb\xad`,
		"tag\U000e0041":                 `tag\U000e0041`,
		`lit\x1b.txt`:                   `lit\\x1b.txt`,
	} {
		got, ok := Name(in)
		if got != want || ok != (in == want) {
			t.Errorf("Name(%q) = %q, %v; want %q", in, got, ok, want)
		}
		if strings.IndexFunc(got, func(r rune) bool { return r != '\\' && Unsafe(r) }) >= 0 {
			t.Errorf("Name(%q) = %q still carries an unsafe character", in, got)
		}
	}
}

func TestJSON(t *testing.T) {
	b, _ := json.Marshal(map[string]string{"host": "evil\u202etxt\u0085\x1b"})
	safe := JSON(b)
	if strings.ContainsRune(string(safe), 0x202e) || strings.ContainsRune(string(safe), 0x85) || strings.ContainsRune(string(safe), 0x1b) {
		t.Fatalf("raw unsafe characters left: %q", safe)
	}
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil || back["host"] != "evil\u202etxt\u0085\x1b" {
		t.Fatalf("not the same JSON value: %q %v", back["host"], err)
	}
	if plain := []byte(`{"a":"b"}`); string(JSON(plain)) != string(plain) {
		t.Fatal("safe JSON changed")
	}
}
