package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// A malformed line on the runner's event stream is reported, not skipped:
// the execution ends with an error naming it, and the runner is stopped.
func TestEventJSONMalformedLineFromRunner(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "fake-runner")
	script := "#!/bin/sh\necho '{\"seq\":1,\"type\":\"ready\",\"ts\":1}' >&4\necho 'this is not an event' >&4\nexec sleep 60 >&4\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	events := make(chan Event, 8)
	p, err := StartProcessWith(fake, Spec{Argv: []string{"/bin/true"}}, func(e Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e)
		case <-timeout:
			t.Fatalf("no end within 10 s (the runner was not stopped): %+v", got)
		}
	}
	<-p.Done()
	if got[0].Type != EventReady || got[1].Type != EventError || got[1].ErrCode != ErrCodeRunnerCrashed ||
		!strings.Contains(got[1].Message, "malformed") || !strings.Contains(got[1].Message, "this is not an event") {
		t.Fatalf("events: %+v", got)
	}
}
