package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestMeasureReply(t *testing.T) {
	text := `{"execution_id":"e1","status":"completed","exit_code":0,"output":[{"seq":1,"type":"stdout","data":"hello\n"}],"next_seq":2}`
	raw, _ := json.Marshal(map[string]any{
		"content": []any{
			map[string]any{"type": "text", "text": text},
			map[string]any{"type": "resource_link", "uri": "http://x/chart.png", "name": "chart.png"},
			map[string]any{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
		},
		// Indented, as a server may send it: Claude Code's view is its
		// compact JSON.
		"structuredContent": json.RawMessage("{\n  \"status\": \"completed\",\n  \"cut\": \"output past 40000 characters ...\",\n  \"next_seq\": 9\n}"),
	})
	r, err := measureReply(replyCost{Server: "srt-mcp", Call: "echo"}, raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != len(text) || r.Result != len(raw) || !r.measured {
		t.Errorf("text %d (want %d), result %d (want %d), measured %v", r.Text, len(text), r.Result, len(raw), r.measured)
	}
	if want := `{"status":"completed","cut":"output past 40000 characters ...","next_seq":9}`; r.sc != want || r.Structured != len(want) {
		t.Errorf("structured %d %q, want the compact %q", r.Structured, r.sc, want)
	}
	if r.Extra != "resource_link, image (8 B base64)" {
		t.Errorf("extra = %q", r.Extra)
	}
	if !strings.Contains(r.Note, "since_seq=9") {
		t.Errorf("a cut reply's note should say where to read on: %q", r.Note)
	}

	// A text-only reply (mcp-run-python's) has no structured content.
	raw = []byte(`{"content":[{"type":"text","text":"<status>success</status>"}]}`)
	if r, err = measureReply(replyCost{}, raw); err != nil || r.Structured != 0 || r.Text != 24 || r.Note != "" {
		t.Errorf("text only: %+v %v", r, err)
	}

	// A failed call is not weighed: its error names why.
	raw = []byte(`{"content":[{"type":"text","text":"Traceback (most recent call last):\n  File \"x\"\nModuleNotFoundError: No module named 'micropip'\nmore"}],"isError":true}`)
	if _, err = measureReply(replyCost{}, raw); err == nil || !strings.Contains(err.Error(), "ModuleNotFoundError: No module named 'micropip'") {
		t.Errorf("a failed call: %v", err)
	}
}

func TestFirstErrorLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fetch failed", "fetch failed"},
		{"Traceback:\n  x\nValueError: bad\n", "ValueError: bad"},
		{"\n first\nsecond", "first"},
		{strings.Repeat("a", 200), strings.Repeat("a", 117) + "..."},
	} {
		if got := firstErrorLine(c.in); got != c.want {
			t.Errorf("firstErrorLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 11906: "11,906", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWriteCostTables(t *testing.T) {
	var b bytes.Buffer
	writeCostTables(&b, costTable{
		Tokenizer: "o200k_base",
		Catalogues: []catalogueCost{
			{Server: "srt-mcp", Profile: "--tools all", Tools: 26, Bytes: 11906, Tokens: 2752},
			{Server: "peer", Profile: "(one set)", Note: "not measured: not installed"},
		},
		Replies: []replyCost{
			{Server: "srt-mcp", Call: "echo", Text: 340, Structured: 340, Result: 791, TextTokens: 128, StructuredTokens: 128, measured: true},
			{Server: "srt-mcp", Call: "png", Text: 485, Structured: 495, Result: 20542, TextTokens: 182, StructuredTokens: 186,
				Extra: "image (19,232 B base64)", Note: "cut", measured: true},
			{Server: "peer", Call: "print", Text: 200, Result: 300, TextTokens: 50, measured: true},
			{Server: "peer", Call: "print", Note: "not measured: offline"},
		},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"| server | tools | tools/list bytes | tokens |",
		"|---|--:|--:|--:|",
		"| srt-mcp `--tools all` | 26 | 11,906 | 2,752 |",
		"| peer | not measured: not installed | | |",
		"",
		"| server | call | content[0].text bytes (most hosts) | structuredContent bytes (Claude Code) | whole result bytes | tokens: text / structured | also in the reply |",
		"|---|---|--:|--:|--:|--:|---|",
		"| srt-mcp | echo | 340 | 340 | 791 | 128 / 128 |  |",
		"| srt-mcp | png | 485 | 495 | 20,542 | 182 / 186 | image (19,232 B base64); cut |",
		"| peer | print | 200 | none | 300 | 50 |  |",
		"| peer | print | not measured: offline | | | | |",
		"",
		"tokens: o200k_base",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
	// Every row of a markdown table has its header's number of cells.
	for _, l := range lines {
		if strings.HasPrefix(l, "| server | tools") {
			continue
		}
		if strings.HasPrefix(l, "|") && strings.Count(l, "|") != 5 && strings.Count(l, "|") != 8 {
			t.Errorf("%d cells: %q", strings.Count(l, "|")-1, l)
		}
	}
}

func TestCostRowsForAll(t *testing.T) {
	rows := []Row{}
	s := &suite{summary: &rows}
	s.addCostRows(costTable{
		Catalogues: []catalogueCost{
			{Server: "srt-mcp", Profile: "--tools all", Bytes: 11906},
			{Server: "srt-mcp", Profile: "--tools execute_code", Bytes: 2011},
			{Server: "mcp-run-python 0.0.5", Bytes: 730},
		},
		Replies: []replyCost{{Server: "srt-mcp", Call: "execute_code 200 KB stdout", Text: 37611, Structured: 37611, measured: true}},
	})
	if len(rows) != 3 {
		t.Fatalf("rows = %+v", rows)
	}
	for _, r := range rows {
		if !r.Met {
			t.Errorf("%s: %s against %s is met", r.Path, r.Now, r.Goal)
		}
	}
	if rows[1].Anchor != "730 B" || rows[2].Now != "37,611 B" {
		t.Errorf("rows = %+v", rows)
	}
}

func TestSSEData(t *testing.T) {
	body := "event: message\r\ndata: {\"result\":{\"d\":\"/mnt/data: files\"}}\r\n\r\n"
	if got := string(sseData([]byte(body))); got != `{"result":{"d":"/mnt/data: files"}}` {
		t.Errorf("sseData = %q", got)
	}
}
