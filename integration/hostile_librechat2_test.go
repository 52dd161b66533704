//go:build linux

package integration

// Hostile review of the LibreChat Code API's storage-session index rebuilt
// from the workspace listing after every /exec (c08e537, 56d50c7).

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
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
	if !has["data.csv"] || !has["report.txt"] {
		t.Errorf("after a run that made 1000 junk files, storage session %s lists %d files; data.csv listed: %v, report.txt listed: %v (in the exec reply: %v): the index was cut at the listing's bound and the input and the run's output are gone from the Code API though still on disk",
			sid, len(names), has["data.csv"], has["report.txt"], inReply)
	}
}

// Attack: the sandbox makes 1000 empty files with ~1000-byte names made
// of '<' (4 nested directories of 240 '<', then fNNNN): the listing's
// bound (1000 files, 1 MiB of names) is just met. Then the client (or the
// model, through LibreChat's session_id fallback) runs /exec with
// session_id naming that storage session.
// What went wrong: the index now holds every listed file, and json
// escapes '<' as \u003c, so the session's index is ~6 MiB (stored in the
// state directory, outside the workspace quota). exec copies every indexed
// file of the named session in, and for each one readFile re-reads and
// re-parses the whole index (lc.readIndex under lc.mu): 1000 x 6 MiB = ~6
// GB of JSON decoded for one request, with the Code API's global mutex
// taken 1000 times, and the request's context is never checked (a client
// that hangs up does not stop it). Before the change an exec indexed at
// most 50 files. One request of one principal burns minutes of server CPU;
// a few in parallel starve every other LibreChat user.
// Suggested fix: read the source session's index once per exec (and per
// source session), not once per file; bound the index's size per session
// (entries and bytes as stored, not names as shown), charge it to the
// principal, and check r.Context() in the copy loop.
func TestHostileLibreChatIndexQuadraticExec(t *testing.T) {
	parallel(t)
	lc, mint, priv := lcServer(t, "--librechat-rate-scale", "10")
	alice := map[string]string{"Authorization": "Bearer " + mint("alice", priv)}
	bob := map[string]string{"Authorization": "Bearer " + mint("bob", priv)}
	code := `import os
d = "/".join(["<" * 240] * 4)
os.makedirs(d, exist_ok=True)
for i in range(1000):
    open(d + "/f%04d" % i, "w").close()
print("ok")
`
	c, v := lcExec(t, lc, alice, map[string]any{"lang": "py", "code": code})
	if c != 200 || v["stdout"] != "ok\n" {
		t.Fatalf("exec: %d %v", c, v)
	}
	sid, _ := v["session_id"].(string)
	n := len(lcListNames(t, lc, alice, sid))
	t.Logf("storage session %s indexes %d files", sid, n)
	bsid, _ := lcUpload(t, lc, bob, map[string]string{"b.txt": "b"})

	// Bob lists his own session while alice's exec runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var worst time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			lcListNames(t, lc, bob, bsid)
			if d := time.Since(t0); d > worst {
				worst = d
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t0 := time.Now()
	done := make(chan struct{})
	var c2 int
	go func() {
		defer close(done)
		c2, _ = lcExec(t, lc, alice, map[string]any{"lang": "py", "code": "print(1)", "session_id": sid})
	}()
	limit := 30 * time.Second
	select {
	case <-done:
	case <-time.After(limit):
	}
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	if took >= limit {
		t.Errorf("an exec naming storage session %s (%d indexed files, names of '<') had not finished after %v (worst list latency of another user meanwhile: %v): the source index is re-parsed once per file it holds",
			sid, n, took, worst)
	} else {
		t.Logf("exec with session_id: %d in %v; bob's worst list: %v", c2, took, worst)
	}
}
