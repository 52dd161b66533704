//go:build linux

package integration

// Hostile review of the LibreChat Code API's storage-session index rebuilt
// from the workspace listing after every /exec (c08e537, 56d50c7). Its
// second finding (an exec reading a source index once per input file:
// minutes of CPU) is on branch attack-lclist (8742bae) until it is fixed.

import (
	"encoding/json"
	"testing"
)

// lcExec posts /exec as hdr's principal; the status and decoded reply.
func lcExec(t *testing.T, lc string, hdr map[string]string, body map[string]any) (int, map[string]any) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	code, out := ownHTTP(t, "POST", lc+"/exec", h, lcJSONBody(body))
	var v map[string]any
	_ = json.Unmarshal([]byte(out), &v)
	return code, v
}

// lcListNames is the original-filename of every entry of storage session
// sid's listing.
func lcListNames(t *testing.T, lc string, hdr map[string]string, sid string) []string {
	t.Helper()
	code, out := ownHTTP(t, "GET", lc+"/files/"+sid+"?detail=full", hdr, nil)
	var list []struct {
		Metadata map[string]string `json:"metadata"`
	}
	if code != 200 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list %s: %d %.300s", sid, code, out)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Metadata["original-filename"])
	}
	return names
}

// Attack: the code in the sandbox (a package the model installed) makes
// 1000 empty files whose names sort before the user's (0000/f0000 ...),
// next to the input it was given (data.csv) and the output it was asked
// for (report.txt).
// What went wrong: indexRun builds the storage session's index from
// svc.Files, which stops at maxListedFiles (1000) or a MiB of names and
// says how many it left out ("more"), which indexRun ignores. The index is
// silently truncated: the input (whose id "inputs keep their ids" promised
// to keep) and the run's real output vanish from the session's listing,
// from the exec reply's files and from /download and /sessions/.../objects
// (404), although both are still on disk, charged to the quota, and can no
// longer be deleted through the Code API. A run can hide any file from the
// user this way (and before this change an unchanged input kept its id).
// Suggested fix: build the index from the inputs and the run's changed
// files first (then the rest of the listing) and, when the listing was cut
// short (more > 0), keep the entries it did not reach (or refuse to drop
// any that still exist), and say in the reply that the listing was cut.
func TestHostileLibreChatIndexTruncatedHidesFiles(t *testing.T) {
	parallel(t)
	lc, _, _ := lcServer(t)
	key := map[string]string{"X-API-Key": lcKey}
	up, ids := lcUpload(t, lc, key, map[string]string{"data.csv": "a,b\n1,2\n"})
	code := `import os
os.makedirs("0000", exist_ok=True)
for i in range(1000):
    open("0000/f%04d" % i, "w").close()
open("report.txt", "w").write(open("data.csv").read().upper())
print("ok")
`
	c, v := lcExec(t, lc, key, map[string]any{"lang": "py", "code": code,
		"files": []map[string]any{{"id": ids["data.csv"], "session_id": up, "name": "data.csv"}}})
	if c != 200 || v["stdout"] != "ok\n" {
		t.Fatalf("exec: %d %v", c, v)
	}
	sid, _ := v["session_id"].(string)
	names := lcListNames(t, lc, key, sid)
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	inReply := false
	files, _ := v["files"].([]any)
	for _, f := range files {
		if m, _ := f.(map[string]any); m["name"] == "report.txt" {
			inReply = true
		}
	}
	// The run's own output past the listing's bound (report.txt here) is
	// the branch's version of this test: the run's changed files are
	// bounded the same way, so it needs a listing that puts them first.
	if !has["data.csv"] {
		t.Errorf("after a run that made 1000 junk files, storage session %s lists %d files; data.csv listed: %v, report.txt listed: %v (in the exec reply: %v): the index was cut at the listing's bound and the input and the run's output are gone from the Code API though still on disk",
			sid, len(names), has["data.csv"], has["report.txt"], inReply)
	}
}
