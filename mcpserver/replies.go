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

// pageEvents is a reply's share of events: all of them while the data of
// their stdout and stderr events fits budget characters, else those up to
// the one that does not fit. next is the seq to read on from (pass it as
// since_seq); cut, when not "", says what was left out. An event larger
// than the whole budget is cut to it where it leads a reply, so that
// paging always moves on; the rest of that event is then lost to replies
// (the default budget is larger than any one event the runner emits).
func pageEvents(events []service.Event, next uint64, budget int) (page []service.Event, nextSeq uint64, cut string) {
	used := 0
	for i, e := range events {
		if e.Type == service.EventStdout || e.Type == service.EventStderr {
			if used+len(e.Data) > budget {
				if used == 0 {
					keep := validPrefix(e.Data, budget)
					e.Data = keep
					page = append(events[:i:i], e)
					return page, e.Seq, fmt.Sprintf("output past %d characters is not in this reply (%d characters of event %d are left out); read on with get_execution_output since_seq=%d",
						budget, len(events[i].Data)-len(keep), e.Seq, e.Seq)
				}
				prev := events[i-1].Seq
				return events[:i], prev, fmt.Sprintf("output past %d characters is not in this reply; read on with get_execution_output since_seq=%d", budget, prev)
			}
			used += len(e.Data)
		}
	}
	return events, next, ""
}

// validPrefix is the longest prefix of b of at most n bytes that does not
// end inside a UTF-8 sequence.
func validPrefix(b []byte, n int) []byte {
	if n >= len(b) {
		return b
	}
	b = b[:n]
	for k := 0; k < utf8.UTFMax && len(b) > 0; k++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// clip bounds a text field to n characters, keeping its head and its tail
// (a program's last lines and a traceback's end are where answers are),
// and says how much was cut in the text itself.
func clip(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	head := string(validPrefix([]byte(s), n/2))
	tail := s[len(s)-(n-len(head)):]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	cut := len(s) - len(head) - len(tail)
	return head + fmt.Sprintf("\n[... %d characters cut ...]\n", cut) + tail, cut
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
