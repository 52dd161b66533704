package runner

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEventJSON(t *testing.T) {
	for _, e := range []Event{
		{Seq: 1, Type: EventReady, TS: 1.5},
		{Seq: 2, Type: EventStdout, TS: 2, Data: []byte("héllo\n")},
		{Seq: 3, Type: EventStderr, TS: 3, Data: []byte{0xff, 0x00, 0xfe}},
		{Seq: 4, Type: EventExit, TS: 4, ExitCode: 3, DurationMS: 12, Truncated: []string{"stdout"}},
		{Seq: 5, Type: EventError, TS: 5, ErrCode: ErrCodeNotFound, Message: "nope"},
		{Seq: 6, Type: EventViolation, TS: 6, Violation: &Violation{Kind: "network", Decision: "deny", Host: "x.com", Port: 443, Rule: "r"}},
	} {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if string(back.Data) != string(e.Data) || back.ExitCode != e.ExitCode || back.ErrCode != e.ErrCode || back.Type != e.Type || back.Seq != e.Seq {
			t.Fatalf("round trip of %s: %+v -> %s -> %+v", e.Type, e, b, back)
		}
		s := string(b)
		switch e.Type {
		case EventExit:
			if !strings.Contains(s, `"code":3`) {
				t.Fatalf("exit code should be a number: %s", s)
			}
		case EventError:
			if !strings.Contains(s, `"code":"command_not_found"`) {
				t.Fatalf("error code should be a string: %s", s)
			}
		case EventStdout:
			if !strings.Contains(s, `"data":"héllo\n"`) {
				t.Fatalf("UTF-8 output should be text: %s", s)
			}
		case EventStderr:
			if !strings.Contains(s, `"data_b64":`) {
				t.Fatalf("binary output should be base64: %s", s)
			}
		}
	}
	if !(&Event{Type: EventTimeout}).Terminal() || (&Event{Type: EventStdout}).Terminal() {
		t.Fatal("Terminal")
	}
}
