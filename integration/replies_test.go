package integration

// Replies bounded by --max-reply-chars (issue 28): a big stdout comes back
// cut near 40,000 characters with content[0].text the JSON of
// structuredContent, and the whole output is read by paging
// get_execution_output from next_seq, through mcp-go's client.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// bigStdout prints 200,000 bytes: 25,000 numbered 8-byte lines, so a
// lost, repeated or reordered page shows.
const bigStdout = "seq -f '%07g' 1 25000"

func wantBigStdout() string {
	var b strings.Builder
	for i := 1; i <= 25000; i++ {
		fmt.Fprintf(&b, "%07d\n", i)
	}
	return b.String()
}

// outputPage is one reply's output, read through mcp-go as a client
// reads it, with the checks every reply must pass: content[0].text is
// compact JSON equal to structuredContent, and the text stays near
// --max-reply-chars (40,000 by default) however much output there is.
type outputPage struct {
	Status  string `json:"status"`
	NextSeq uint64 `json:"next_seq"`
	Cut     string `json:"cut"`
	Output  []struct {
		Seq  uint64 `json:"seq"`
		Type string `json:"type"`
		Data string `json:"data"`
	} `json:"output"`
	ExecutionID string `json:"execution_id"`
}

func readPage(t *testing.T, c *client.Client, name string, args map[string]any) (outputPage, int) {
	t.Helper()
	res, err := callRaw(c, name, args)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s %v: %+v", name, args, res)
	}
	text, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content[0] is %T, not text", name, res.Content[0])
	}
	if len(text.Text) > 45_000 {
		t.Errorf("%s: content[0].text is %d characters (over 45,000)", name, len(text.Text))
	}
	var fromText, fromStructured any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("%s: content[0].text is not JSON: %v: %.200s", name, err, text.Text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &fromStructured)
	if !reflect.DeepEqual(fromText, fromStructured) {
		t.Errorf("%s: content[0].text differs from structuredContent", name)
	}
	var p outputPage
	if err := json.Unmarshal([]byte(text.Text), &p); err != nil {
		t.Fatal(err)
	}
	return p, len(text.Text)
}

// stdoutOf is a page's stdout events' data, checking their seqs rise.
func (p outputPage) stdout(t *testing.T, after uint64) string {
	t.Helper()
	var b strings.Builder
	for _, e := range p.Output {
		if e.Seq <= after {
			t.Errorf("event %d is not after since_seq %d", e.Seq, after)
		}
		if e.Type == "stdout" {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

// pageRest reads an execution's output from since until a reply is not
// cut and the execution has ended; it returns the stdout read and the
// number of replies.
func pageRest(t *testing.T, c *client.Client, id string, since uint64) (string, int) {
	t.Helper()
	var got strings.Builder
	for pages := 1; ; pages++ {
		if pages > 50 {
			t.Fatalf("still cut after 50 pages (%d bytes read)", got.Len())
		}
		p, _ := readPage(t, c, "get_execution_output", map[string]any{"execution_id": id, "since_seq": since, "wait": true, "wait_for": "completion"})
		got.WriteString(p.stdout(t, since))
		if p.Cut != "" && !strings.Contains(p.Cut, fmt.Sprintf("since_seq=%d", p.NextSeq)) {
			t.Errorf("the cut note does not say to read on from next_seq %d: %s", p.NextSeq, p.Cut)
		}
		if p.NextSeq < since {
			t.Fatalf("next_seq went back from %d to %d", since, p.NextSeq)
		}
		since = p.NextSeq
		if p.Cut == "" && p.Status != "running" {
			return got.String(), pages
		}
	}
}

// A 200 KB stdout: the synchronous reply and an async run's reply both
// stop near 40,000 characters, say they are cut, and paging
// get_execution_output from next_seq reads every byte exactly once.
func TestReplyCutPagesWholeOutput(t *testing.T) {
	parallel(t)
	s := startServe(t, "--backend", "native")
	c := connect(t, s.url)
	want := wantBigStdout()

	first, size := readPage(t, c, "execute_code", map[string]any{"command": bigStdout})
	head := first.stdout(t, 0)
	if first.Cut == "" || len(head) == 0 || len(head) > 40_000 || first.Status != "completed" {
		t.Fatalf("execute_code of 200 KB: cut %q, %d bytes of stdout in a %d-character reply, status %s", first.Cut, len(head), size, first.Status)
	}
	rest, pages := pageRest(t, c, first.ExecutionID, first.NextSeq)
	if got := head + rest; got != want {
		t.Fatalf("execute_code then %d pages read %d bytes, want the 200,000 printed (first difference at %d)", pages, len(got), firstDiff(got, want))
	}
	t.Logf("execute_code: %d bytes of stdout in a %d-character reply, then %d pages", len(head), size, pages)
	if pages < 4 {
		t.Errorf("200,000 bytes came in %d pages after the first, under 40,000 each would take at least 4", pages)
	}

	// The same output from an async run, read only with
	// get_execution_output from the start.
	start, _ := readPage(t, c, "execute_code_async", map[string]any{"command": bigStdout})
	if start.ExecutionID == "" {
		t.Fatalf("execute_code_async: %+v", start)
	}
	all, pages := pageRest(t, c, start.ExecutionID, 0)
	if all != want {
		t.Fatalf("async: %d pages read %d bytes, want the 200,000 printed (first difference at %d)", pages, len(all), firstDiff(all, want))
	}
	t.Logf("async: %d pages", pages)
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
