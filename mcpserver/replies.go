package mcpserver

// Replies: what a tool call answers, as every client reads it.
//
// A result's structuredContent is the contract; content[0] is its compact
// JSON (the MCP spec's SHOULD for a tool that returns structured content,
// and what seed 002's example client parses with json.loads), followed by
// resource links and image previews where a run made files. Output is
// bounded per reply (Config.ReplyChars): a model's context is not flooded
// and Claude Code does not move the result to a file; past the bound the
// reply says so and where the rest is.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/srt-mcp/srt-mcp/service"
)

// reply is a result whose content the jsonText middleware fills in.
func reply(v any, isErr bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{StructuredContent: v, IsError: isErr}
}

// jsonText makes content[0] of every result the JSON of its structured
// content, after the handler has finished changing it.
func (s *Server) jsonText(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := next(ctx, req)
		if res == nil || res.StructuredContent == nil {
			return res, err
		}
		content := []mcp.Content{mcp.NewTextContent(compactJSON(res.StructuredContent))}
		for _, c := range res.Content {
			if _, text := c.(mcp.TextContent); !text {
				content = append(content, c)
			}
		}
		res.Content = content
		return res, err
	}
}

// compactJSON is v as JSON without indentation or HTML escaping (a model
// reads "<" better than "\u003c", and it is shorter).
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf(`{"error":"internal","message":%q}`, "the reply could not be serialized: "+err.Error())
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// pageEvents is a reply's share of events: all of them while their JSON
// fits budget characters, else those up to the one that does not fit.
// Every event counts, with its fields: a run that writes a byte at a time
// or is refused ten thousand connections makes many small events. next is
// the seq to read on from (pass it as since_seq); cut, when not "", says
// what was left out. An output event larger than the whole budget is cut
// to it where it leads a reply, so that paging always moves on; the rest
// of that event is then lost to replies (the default budget is larger
// than any one event the runner emits).
func pageEvents(events []service.Event, next uint64, budget int) (page []service.Event, nextSeq uint64, cut string) {
	used := 0
	for i, e := range events {
		cost := len(compactJSON(e)) + 1 // and its comma
		if used+cost <= budget {
			used += cost
			continue
		}
		if i > 0 {
			prev := events[i-1].Seq
			return events[:i], prev, fmt.Sprintf("output past %d characters is not in this reply; read on with get_execution_output since_seq=%d", budget, prev)
		}
		if e.Type == service.EventStdout || e.Type == service.EventStderr {
			keep := leadWithin(e, budget)
			e.Data = keep
			return []service.Event{e}, e.Seq, fmt.Sprintf("output past %d characters is not in this reply (%d bytes of event %d are left out); read on with get_execution_output since_seq=%d",
				budget, len(events[i].Data)-len(keep), e.Seq, e.Seq)
		}
		return []service.Event{e}, e.Seq, fmt.Sprintf("output past %d characters is not in this reply; read on with get_execution_output since_seq=%d", budget, e.Seq)
	}
	return events, next, ""
}

// leadWithin is the longest prefix of an output event's data with which
// the event's JSON (and its comma) takes at most budget characters. Text
// is cut at a rune by its escaped length; other data goes as base64, and
// a cut prefix may turn out to be text, so the result is measured and
// shortened until it fits.
func leadWithin(e service.Event, budget int) []byte {
	overhead := len(compactJSON(service.Event{Seq: e.Seq, Type: e.Type, TS: e.TS, Data: []byte{}})) + 1
	room := max(0, budget-overhead)
	keep := prefixWithin(e.Data, room)
	if !utf8.Valid(e.Data) {
		keep = e.Data[:min(len(e.Data), room/4*3)]
	}
	for len(keep) > 0 {
		e.Data = keep
		if len(compactJSON(e))+1 <= budget {
			break
		}
		keep = keep[:len(keep)*7/8]
	}
	return keep
}

// textCost is the length of valid UTF-8 text once JSON-escaped.
func textCost(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		n += runeCost(r, size)
		i += size
	}
	return n
}

func runeCost(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029' || r == utf8.RuneError && size == 1:
		return 6
	}
	return size
}

// prefixWithin is the longest prefix of b, whole runes only, whose JSON
// spelling takes at most n characters.
func prefixWithin(b []byte, n int) []byte {
	used := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		c := runeCost(r, size)
		if used+c > n {
			return b[:i]
		}
		used += c
		i += size
	}
	return b
}

// suffixWithin is the longest suffix of b, whole runes only, whose JSON
// spelling takes at most n characters.
func suffixWithin(b []byte, n int) []byte {
	used := 0
	for i := len(b); i > 0; {
		r, size := utf8.DecodeLastRune(b[:i])
		c := runeCost(r, size)
		if used+c > n {
			return b[i:]
		}
		used += c
		i -= size
	}
	return b
}

// clip bounds a text field to n characters of its JSON spelling, keeping
// its head and its tail (a program's last lines and a traceback's end are
// where answers are), and says in the text how much was cut.
func clip(s string, n int) (string, int) {
	if textCost([]byte(s)) <= n {
		return s, 0
	}
	head := prefixWithin([]byte(s), n/2)
	tail := suffixWithin([]byte(s[len(head):]), n-textCost(head))
	cut := len(s) - len(head) - len(tail)
	return string(head) + fmt.Sprintf("\n[... %d bytes cut ...]\n", cut) + string(tail), cut
}

// shareReply splits a reply's n characters between two texts of the given
// lengths: each gets what it needs when both fit, else the shorter keeps
// up to half and the other gets the rest.
func shareReply(a, b, n int) (int, int) {
	switch {
	case a+b <= n:
		return a, b
	case b <= n/2:
		return n - b, b
	case a <= n/2:
		return a, n - a
	}
	return n / 2, n - n/2
}

// clippedStreams are a reply's stdout and stderr within its bound.
type clippedStreams struct {
	stdout, stderr       string
	stdoutCut, stderrCut bool
	// note, when not "", says how much went; it ends with "; " for the
	// caller to say where the rest is.
	note string
}

// clipStreams bounds stdout and stderr together to n characters, shared
// by shareReply, each clipped head and tail.
func clipStreams(stdout, stderr string, n int) clippedStreams {
	outMax, errMax := shareReply(textCost([]byte(stdout)), textCost([]byte(stderr)), n)
	var c clippedStreams
	var outCut, errCut int
	c.stdout, outCut = clip(stdout, outMax)
	c.stderr, errCut = clip(stderr, errMax)
	c.stdoutCut, c.stderrCut = outCut > 0, errCut > 0
	if outCut+errCut > 0 {
		c.note = fmt.Sprintf("%d bytes of stdout and %d of stderr are cut from the middle of this reply (it holds at most %d characters of output); ",
			outCut, errCut, n)
	}
	return c
}

// shownFiles is the part of a run's files a reply lists: as many as fit a
// quarter of the reply bound as the reply's JSON spells them (a run can
// make a thousand files with long names); the rest are counted, and
// list_artifacts has them.
func (s *Server) shownFiles(files []service.File) []service.File {
	used, budget := 0, s.cfg.ReplyChars/4
	for i, f := range files {
		used += len(compactJSON(artifactJSON(f))) + 1
		if used > budget {
			return files[:i]
		}
	}
	return files
}
