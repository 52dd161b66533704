package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/srt-mcp/srt-mcp/service"
)

func events(sizes ...int) []service.Event {
	var evs []service.Event
	evs = append(evs, service.Event{Seq: 1, Type: service.EventReady})
	for i, n := range sizes {
		evs = append(evs, service.Event{Seq: uint64(i + 2), Type: service.EventStdout, Data: []byte(strings.Repeat("x", n))})
	}
	return append(evs, service.Event{Seq: uint64(len(sizes) + 2), Type: service.EventExit})
}

func TestPageEvents(t *testing.T) {
	all := events(100, 200, 300)
	if page, next, cut := pageEvents(all, 5, 1000); len(page) != 5 || next != 5 || cut != "" {
		t.Errorf("everything fits: %d events, next %d, cut %q", len(page), next, cut)
	}
	// 100+200 and their fields fit in 450, 300 more do not: the reply
	// stops after seq 3.
	page, next, cut := pageEvents(all, 5, 450)
	if len(page) != 3 || next != 3 || !strings.Contains(cut, "since_seq=3") {
		t.Errorf("cut after two events: %d events, next %d, cut %q", len(page), next, cut)
	}
	// Reading on from there gets the rest.
	page, next, cut = pageEvents(all[3:], 5, 450)
	if len(page) != 2 || next != 5 || cut != "" {
		t.Errorf("the rest: %d events, next %d, cut %q", len(page), next, cut)
	}
	// An event larger than the budget leads a reply: it is cut to the
	// budget and paging moves past it.
	big := events(1000, 10)
	page, next, cut = pageEvents(big[1:], 4, 300)
	if len(page) != 1 || len(page[0].Data) < 250 || len(page[0].Data) > 300 || next != 2 || !strings.Contains(cut, "bytes of event 2 are left out") {
		t.Errorf("a large event: %d events, %d bytes, next %d, cut %q", len(page), len(page[0].Data), next, cut)
	}
	if n := len(compactJSON(page[0])); n > 300 {
		t.Errorf("the cut event's JSON is %d characters, over the bound of 300", n)
	}
	// Many tiny events cost their fields too.
	var tiny []service.Event
	for i := range 1000 {
		tiny = append(tiny, service.Event{Seq: uint64(i + 1), Type: service.EventStdout, Data: []byte("x")})
	}
	page, _, cut = pageEvents(tiny, 1000, 4000)
	if n := len(compactJSON(page)); n > 4000 || cut == "" || len(page) < 50 {
		t.Errorf("1000 one-byte events in 4000 characters: %d events, %d characters, cut %q", len(page), n, cut)
	}
	if len(big[1].Data) != 1000 {
		t.Error("pageEvents changed the events it was given")
	}
}

func TestClipKeepsHeadTailAndUTF8(t *testing.T) {
	s := strings.Repeat("é", 1000) + "END"
	c, n := clip(s, 101)
	if n == 0 || !utf8.ValidString(c) || !strings.HasSuffix(c, "END") || !strings.HasPrefix(c, "é") || !strings.Contains(c, "bytes cut") {
		t.Errorf("clip: %d cut, %q", n, c)
	}
	if kept := len(c[:strings.Index(c, "\n[...")]) + len(c[strings.Index(c, "...]\n")+5:]); kept > 101 || kept+n != len(s) {
		t.Errorf("clip kept %d bytes and cut %d of %d for a budget of 101", kept, n, len(s))
	}
	if c, n := clip("short", 10); c != "short" || n != 0 {
		t.Errorf("a short text was clipped: %q %d", c, n)
	}
	for _, tc := range [][5]int{{10, 10, 100, 10, 10}, {90, 5, 50, 45, 5}, {5, 90, 50, 5, 45}, {90, 90, 50, 25, 25}} {
		if a, b := shareReply(tc[0], tc[1], tc[2]); a != tc[3] || b != tc[4] {
			t.Errorf("shareReply(%d, %d, %d) = %d, %d", tc[0], tc[1], tc[2], a, b)
		}
	}
}

// TestTextIsTheStructuredJSON: content[0] is what json.loads reads in
// seed 002's example client, after every change a handler made.
func TestTextIsTheStructuredJSON(t *testing.T) {
	s := &Server{}
	h := s.jsonText(func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := reply(map[string]any{"status": "completed", "output": []any{map[string]any{"type": "stdout", "data": "<a&b>"}}}, false)
		r.StructuredContent.(map[string]any)["exit_code"] = 0
		r.Content = append(r.Content, mcp.NewResourceLink("artifact://x/y", "y", "", "text/plain"))
		return r, nil
	})
	res, _ := h(context.Background(), mcp.CallToolRequest{})
	if len(res.Content) != 2 {
		t.Fatalf("content: %v", res.Content)
	}
	text := res.Content[0].(mcp.TextContent).Text
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); err != nil || got["exit_code"] != 0.0 || !strings.Contains(text, "<a&b>") || strings.Contains(text, "\n") {
		t.Errorf("text %q: %v", text, err)
	}
	if _, ok := res.Content[1].(mcp.ResourceLink); !ok {
		t.Errorf("the resource link moved: %v", res.Content)
	}
}

// TestReplyBoundCountsJSON: the bound is on what the reply's JSON text
// holds, so output made of characters JSON escapes cannot multiply it.
func TestReplyBoundCountsJSON(t *testing.T) {
	ctl := []service.Event{{Seq: 1, Type: service.EventStdout, Data: []byte(strings.Repeat("\x01", 100))}}
	page, _, cut := pageEvents(ctl, 1, 120+len(`{"seq":1,"type":"stdout","ts":0,"data":""}`)+1)
	if len(page[0].Data) != 20 || cut == "" {
		t.Errorf("100 control characters (600 in JSON) in 120: kept %d, cut %q", len(page[0].Data), cut)
	}
	b, _ := json.Marshal(page[0])
	if !strings.Contains(string(b), `"data":"`+strings.Repeat(`\u0001`, 20)+`"`) {
		t.Errorf("event JSON: %s", b)
	}
	if j := compactJSON(service.Event{Seq: 1, Type: service.EventStdout, Data: []byte{0xff, 0xfe, 0xfd}}); !strings.Contains(j, `"data_b64":"//79"`) {
		t.Errorf("binary data is counted as its base64, four characters for three bytes: %s", j)
	}
	html := []service.Event{{Seq: 1, Type: service.EventStdout, Data: []byte("<class 'int'>")}}
	if text := compactJSON(map[string]any{"output": html}); !strings.Contains(text, "<class 'int'>") {
		t.Errorf("a model reads <, not its escape: %s", text)
	}
	s, n := clip(strings.Repeat("\"", 100), 60)
	if n != 70 || textCost([]byte(s)) > 60+len("\n[... 70 bytes cut ...]\n")+2 {
		t.Errorf("clip of quotes: cut %d, %q", n, s)
	}
}

// TestPageEventsBinaryLeadWithinBound: a run's output read as one 32 KiB
// chunk with a byte that is not UTF-8 is an event the reply spells in
// base64 (4 characters per 3 bytes). Where such an event leads a reply
// and does not fit, it is cut by counting its bytes as text (1 character
// each), so the cut event's base64 is a third over the bound; at the
// default bound a 32 KiB chunk is not cut at all and the reply carries
// 43,700 characters of output for a bound of 40,000 ("0 bytes ... left
// out"). Code in the sandbox only has to print one byte 0xff first.
func TestPageEventsBinaryLeadWithinBound(t *testing.T) {
	chunk := []byte("\xff" + strings.Repeat("a", 32<<10-1)) // one pipe read
	for _, budget := range []int{1000, 20_000, DefaultReplyChars} {
		ev := []service.Event{{Seq: 7, Type: service.EventStdout, Data: chunk}, {Seq: 8, Type: service.EventExit}}
		page, next, cut := pageEvents(ev, 9, budget)
		if n := len(compactJSON(page)); n > budget {
			t.Errorf("budget %d: the page's JSON is %d characters (next %d, cut %q)", budget, n, next, cut)
		}
	}
}
