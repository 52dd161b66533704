package integration

// File events: while a run writes its workspace, a client polling it sees
// the files appear (created, then changed, removed), before the run ends.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFileEventsWhileRunning(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"})
	sid := d.upload("", "old.txt", "old")
	v := d.wantErrorless("execute_code_async", map[string]any{"session_id": sid,
		"command": "echo a > /mnt/data/out.csv; sleep 1; echo b >> /mnt/data/out.csv; rm /mnt/data/old.txt; sleep 2"})
	id := v["execution_id"]
	var seen []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := d.wantErrorless("get_execution_output", map[string]any{"execution_id": id})
		seen = seen[:0]
		for _, e := range out["output"].([]any) {
			e := e.(map[string]any)
			if e["type"] == "file" {
				f := e["file"].(map[string]any)
				seen = append(seen, fmt.Sprintf("%s %s", f["op"], f["path"]))
			}
		}
		got := strings.Join(seen, ", ")
		if strings.Contains(got, "created /mnt/data/out.csv") && strings.Contains(got, "removed /mnt/data/old.txt") {
			if out["status"] != "running" {
				t.Fatalf("the file events came only after the run ended: %s", got)
			}
			break
		}
		if out["status"] != "running" || time.Now().After(deadline) {
			t.Fatalf("file events while the run worked: %q (status %v)", got, out["status"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := d.wantErrorless("get_execution_output", map[string]any{"execution_id": id, "wait": true})
	if out["status"] != "completed" {
		t.Fatalf("the run: %v", out)
	}
}
