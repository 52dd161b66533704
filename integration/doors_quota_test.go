//go:build linux

package integration

// The same tools through every door (issue 26): an upload past the
// workspace quota, a run that writes past it, and the listing of a
// workspace's files answer alike through MCP (upload_file, execute_code,
// list_artifacts), the LibreChat Code API (upload, upload/batch, exec,
// files, objects; its storage sessions are workspaces too) and the
// playground's API (upload, run, files). On a root server a workspace is
// a filesystem of its own: a write past it fails with ENOSPC in the
// program, an upload past it is quota_exceeded. As another user it is a
// directory whose quota a watch enforces: a run past it is stopped and
// its new files removed, quota_exceeded. Either way every door must say
// the same thing, with the same code and the same message, and keep the
// files it already held; a door that answers differently fails here.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

const dqKey = "doors-quota-lc-key"

type dqFile struct{ name, content string }

// dqServer is a server with a 6 MiB workspace quota and the LibreChat
// door, and what its workspaces are ("filesystem" or "directory"). Its
// bodies may be 16 MiB: MCP's upload_file of 8 MiB is base64 in JSON.
func dqServer(t *testing.T, backend []string) (*dataServer, string) {
	t.Helper()
	d := startData(t, backend, "--librechat-api-key", dqKey, "--librechat-rate-scale", "10", "--workspace-quota", "6M",
		"--max-body", "16M", "--exec-timeout-seconds", "120")
	return d, workspaceFS(t, d.url)
}

// dqBig is more than the 6 MiB quota (not zeros: nothing may store it
// sparse).
var dqBig = dqFile{"big.bin", strings.Repeat("0123456789abcdef", (8<<20)/16)}

// dqPost posts files as a multipart form (field "file") and decodes a
// JSON reply.
func dqPost(t *testing.T, u string, hdr map[string]string, files []dqFile) (int, map[string]any, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		fw, err := mw.CreateFormFile("file", f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write([]byte(f.content))
	}
	mw.Close()
	h := map[string]string{"Content-Type": mw.FormDataContentType()}
	for k, v := range hdr {
		h[k] = v
	}
	code, raw := request(t, "POST", u, body.String(), h)
	var v map[string]any
	_ = json.Unmarshal([]byte(raw), &v)
	return code, v, dqCut(raw)
}

// dqGet gets u with the LibreChat key and decodes a JSON reply into v.
func dqGet(t *testing.T, u string, v any) (int, string) {
	t.Helper()
	code, raw := request(t, "GET", u, "", map[string]string{"X-API-Key": dqKey})
	if err := json.Unmarshal([]byte(raw), v); err != nil && code == 200 {
		t.Fatalf("GET %s: %v: %.300s", u, err, raw)
	}
	return code, raw
}

func dqCut(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "..."
	}
	return s
}

// dqNumber is a number in a message, with its unit: the sizes a message
// gives differ between workspaces that hold the same files (a cache, a
// kernel's own files), the meaning does not.
var dqNumber = regexp.MustCompile(`[0-9]+(\.[0-9]+)?( (bytes|KiB|MiB|GiB))?`)

// dqShape is a message without its numbers. Whether the watch stopped the run while it wrote or found it past the
// quota as it ended ("the run was stopped: " or not) is timing, not the door.
func dqShape(msg string) string {
	msg = strings.TrimPrefix(strings.TrimSpace(msg), "the run was stopped: ")
	return dqNumber.ReplaceAllString(msg, "N")
}

// dqListing is a door's listing of a workspace: name -> size.
type dqListing map[string]int64

func (l dqListing) String() string {
	var names []string
	for n := range l {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d ", n, l[n])
	}
	return strings.TrimSpace(b.String())
}

// without is l without name.
func (l dqListing) without(name string) dqListing {
	out := dqListing{}
	for n, s := range l {
		if n != name {
			out[n] = s
		}
	}
	return out
}

// dqMCPList is list_artifacts of an MCP session.
func dqMCPList(t *testing.T, c *client.Client, sid string) dqListing {
	t.Helper()
	v, isErr := callTool(t, c, "list_artifacts", map[string]any{"session_id": sid})
	if isErr {
		t.Fatalf("list_artifacts %s: %v", sid, v)
	}
	out := dqListing{}
	arts, _ := v["artifacts"].([]any)
	for _, a := range arts {
		m := a.(map[string]any)
		size, _ := m["size_bytes"].(float64)
		out[fmt.Sprint(m["filename"])] = int64(size)
	}
	return out
}

// dqLCList is a LibreChat storage session's listing (GET files/{sid}?detail=full)
// by original file name, with each file's id; every file's object
// (GET sessions/{sid}/objects/{fid}) must agree with it.
func dqLCList(t *testing.T, lc, sid string) (dqListing, map[string]string) {
	t.Helper()
	var list []map[string]any
	if code, raw := dqGet(t, lc+"/files/"+sid+"?detail=full", &list); code != 200 {
		t.Fatalf("LibreChat files/%s: %d %s", sid, code, raw)
	}
	out, ids := dqListing{}, map[string]string{}
	for _, f := range list {
		meta, _ := f["metadata"].(map[string]any)
		name := fmt.Sprint(meta["original-filename"])
		size, _ := f["size"].(float64)
		out[name] = int64(size)
		// "<sid>/<fid><ext>"
		fid := strings.TrimPrefix(fmt.Sprint(f["name"]), sid+"/")
		if i := strings.IndexByte(fid, '.'); i >= 0 {
			fid = fid[:i]
		}
		ids[name] = fid
		var obj map[string]any
		if code, raw := dqGet(t, lc+"/sessions/"+sid+"/objects/"+fid, &obj); code != 200 || obj["size"] != f["size"] || obj["originalFilename"] != name {
			t.Errorf("LibreChat object %s/%s disagrees with the listing's %v: %d %.300s", sid, fid, f, code, raw)
		}
	}
	return out, ids
}

// dqPGList is the playground's listing of a conversation's files.
func dqPGList(t *testing.T, base, conv string) dqListing {
	t.Helper()
	var v map[string]any
	code, raw := request(t, "GET", base+"/playground/api/files?conversation="+url.QueryEscape(conv), "", nil)
	if err := json.Unmarshal([]byte(raw), &v); err != nil || code != 200 {
		t.Fatalf("playground files of %s: %d %.300s", conv, code, raw)
	}
	out := dqListing{}
	fl, _ := v["files"].([]any)
	for _, f := range fl {
		m := f.(map[string]any)
		size, _ := m["size_bytes"].(float64)
		out[fmt.Sprint(m["name"])] = int64(size)
	}
	return out
}

// dqLCDownload is the content of a LibreChat file.
func dqLCDownload(t *testing.T, lc, sid, fid string) string {
	t.Helper()
	code, raw := request(t, "GET", lc+"/download/"+sid+"/"+fid, "", map[string]string{"X-API-Key": dqKey})
	if code != 200 {
		t.Errorf("LibreChat download %s/%s: %d %.300s", sid, fid, code, raw)
	}
	return raw
}

// dqQuotaError checks one door's refusal of an upload past the quota:
// quota_exceeded, with a message that says which setting bounds it and
// what to do; it returns the message.
func dqQuotaError(t *testing.T, door string, status int, code, msg any, raw string) string {
	t.Helper()
	m, _ := msg.(string)
	if code != "quota_exceeded" || !strings.Contains(m, "SANDBOX_WORKSPACE_QUOTA") || !strings.Contains(m, "delete files") {
		t.Errorf("%s: an upload past the workspace quota: want quota_exceeded saying SANDBOX_WORKSPACE_QUOTA and to delete files, got %d %v %q: %s",
			door, status, code, m, raw)
	}
	if status != 0 && status != http.StatusRequestEntityTooLarge {
		t.Errorf("%s: an upload past the workspace quota: HTTP %d, want 413 (quota_exceeded's status): %s", door, status, raw)
	}
	return m
}

// dqSame checks that every door's message has the same shape as MCP's.
func dqSame(t *testing.T, what string, msgs map[string]string) {
	t.Helper()
	want := dqShape(msgs["mcp"])
	for door, m := range msgs {
		if dqShape(m) != want {
			t.Errorf("%s: %s says %q; MCP says %q", what, door, m, msgs["mcp"])
		}
	}
}

// An upload past the workspace quota, through every door: the same code,
// HTTP status and message; nothing of it stored, and nothing the
// workspace held before lost.
func TestDoorsQuotaUploads(t *testing.T) {
	parallel(t)
	d, fsMode := dqServer(t, dataBackends(t)["native"])
	base, lc := d.base(), d.base()+"/v1/librechat"
	lcKey := map[string]string{"X-API-Key": dqKey}
	keep := dqFile{"keep.txt", "the user's file"}

	// Into an empty workspace.
	msgs := map[string]string{}
	v, isErr := d.call("upload_file", map[string]any{"filename": dqBig.name, "content_base64": b64(dqBig.content)})
	if !isErr {
		t.Fatalf("MCP upload_file of 8 MiB into a 6 MiB workspace: %v", v)
	}
	msgs["mcp"] = dqQuotaError(t, "MCP upload_file", 0, v["error"], v["message"], fmt.Sprint(v))
	status, lv, raw := dqPost(t, lc+"/upload", lcKey, []dqFile{dqBig})
	msgs["librechat"] = dqQuotaError(t, "LibreChat upload", status, lv["code"], lv["error"], raw)
	status, pv, raw := dqPost(t, base+"/playground/api/upload?conversation=dq-empty", nil, []dqFile{dqBig})
	msgs["playground"] = dqQuotaError(t, "playground upload", status, pv["code"], pv["error"], raw)
	dqSame(t, "an upload past the quota into an empty workspace", msgs)
	if l := dqPGList(t, base, "dq-empty"); len(l) != 0 {
		t.Errorf("playground: the refused upload left files: %v", l)
	}

	// Into a workspace that holds a file: refused alike, and the file
	// stays.
	msgs = map[string]string{}
	sid := d.upload("", keep.name, keep.content)
	v, _ = d.call("upload_file", map[string]any{"session_id": sid, "filename": dqBig.name, "content_base64": b64(dqBig.content)})
	msgs["mcp"] = dqQuotaError(t, "MCP upload_file", 0, v["error"], v["message"], fmt.Sprint(v))
	if l := dqMCPList(t, d.c, sid); l.String() != "keep.txt=15" {
		t.Errorf("MCP: after the refused upload the session lists %v, want keep.txt=15", l)
	}

	// LibreChat's batch upload stores what fits and reports the rest, file
	// by file.
	status, lv, raw = dqPost(t, lc+"/upload/batch", lcKey, []dqFile{keep, dqBig})
	lsid, _ := lv["session_id"].(string)
	files, _ := lv["files"].([]any)
	if status != 200 || lv["message"] != "partial_success" || lv["succeeded"] != 1.0 || lv["failed"] != 1.0 || len(files) != 2 || lsid == "" {
		t.Fatalf("LibreChat batch upload of a file that fits and one that does not: want 200 partial_success, got %d %s", status, raw)
	}
	bad := files[1].(map[string]any)
	if bad["status"] != "error" {
		t.Errorf("LibreChat batch upload: the file past the quota is not an error: %s", raw)
	}
	msgs["librechat"] = dqQuotaError(t, "LibreChat batch upload", 0, bad["code"], bad["error"], raw)
	l, ids := dqLCList(t, lc, lsid)
	if l.String() != "keep.txt=15" {
		t.Errorf("LibreChat: the batch's session lists %v, want keep.txt=15", l)
	} else if got := dqLCDownload(t, lc, lsid, ids["keep.txt"]); got != keep.content {
		t.Errorf("LibreChat: keep.txt reads %q", got)
	}

	// A single upload is all or nothing: refused alike, and the session
	// it would have made holds nothing. The batch's session keeps its
	// file.
	status, lv, raw = dqPost(t, lc+"/upload", lcKey, []dqFile{keep, dqBig})
	dqQuotaError(t, "LibreChat upload of two files", status, lv["code"], lv["error"], raw)
	if l, _ := dqLCList(t, lc, lsid); l.String() != "keep.txt=15" {
		t.Errorf("LibreChat: after a refused upload the batch's session lists %v", l)
	}

	status, _, raw = dqPost(t, base+"/playground/api/upload?conversation=dq-keep", nil, []dqFile{keep})
	if status != 200 {
		t.Fatalf("playground upload of keep.txt: %d %s", status, raw)
	}
	status, pv, raw = dqPost(t, base+"/playground/api/upload?conversation=dq-keep", nil, []dqFile{dqBig})
	msgs["playground"] = dqQuotaError(t, "playground upload", status, pv["code"], pv["error"], raw)
	if l := dqPGList(t, base, "dq-keep"); l.String() != "keep.txt=15" {
		t.Errorf("playground: after the refused upload the conversation lists %v, want keep.txt=15", l)
	}
	dqSame(t, "an upload past the quota into a workspace holding a file", msgs)

	// A LibreChat exec copies its inputs into a session of its own: an
	// input that does not fit is left out, and the exec's output says so
	// with the code and message MCP's upload_file gives for the same file.
	half := strings.Repeat("0123456789abcdef", (4<<20)/16)
	msgs = map[string]string{}
	msid := d.upload("", "one.bin", half)
	v, _ = d.call("upload_file", map[string]any{"session_id": msid, "filename": "two.bin", "content_base64": b64(half)})
	msgs["mcp"] = dqQuotaError(t, "MCP upload_file of a second 4 MiB file", 0, v["error"], v["message"], fmt.Sprint(v))
	var refs []any
	for _, n := range []string{"one.bin", "two.bin"} {
		status, lv, raw := dqPost(t, lc+"/upload", lcKey, []dqFile{{n, half}})
		files, _ := lv["files"].([]any)
		if status != 200 || len(files) != 1 {
			t.Fatalf("LibreChat upload of %s: %d %s", n, status, raw)
		}
		refs = append(refs, map[string]any{"id": files[0].(map[string]any)["fileId"], "session_id": lv["session_id"], "name": n})
	}
	status, ev, raw := doorHTTP(bgctx(), t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": `import os; print(sorted(os.listdir(".")))`, "files": refs}, lcKey)
	stderr := fmt.Sprint(ev["stderr"])
	esid, _ := ev["session_id"].(string)
	if status != 200 || !strings.Contains(fmt.Sprint(ev["stdout"]), "one.bin") || strings.Contains(fmt.Sprint(ev["stdout"]), "two.bin") {
		t.Errorf("LibreChat exec with two 4 MiB inputs: want one.bin in and two.bin out: %d %s", status, dqCut(raw))
	}
	const note = "srt-mcp: input file two.bin: "
	if i := strings.Index(stderr, note); i < 0 {
		t.Errorf("LibreChat exec: the input that did not fit is not reported: %s", dqCut(raw))
	} else {
		line, _, _ := strings.Cut(stderr[i+len(note):], "\n")
		code, msg, _ := strings.Cut(line, ": ")
		msgs["librechat"] = dqQuotaError(t, "LibreChat exec's input past the quota", 0, code, msg, raw)
	}
	dqSame(t, "a second 4 MiB file in a 6 MiB workspace", msgs)
	if esid != "" {
		if l, _ := dqLCList(t, lc, esid); l.String() != dqMCPList(t, d.c, msid).String() {
			t.Errorf("LibreChat lists the exec's session as %v; MCP lists the session holding the same file as %v", l, dqMCPList(t, d.c, msid))
		}
	}

	if fsMode != "filesystem" {
		return
	}
	// A workspace whose filesystem has no free inodes: an upload is
	// quota_exceeded (its quota is full, not the server's disk) through
	// MCP and the playground alike. (A LibreChat upload always makes a
	// session of its own.)
	fill := `
import errno, os
os.mkdir("i")
n = 0
try:
    while True:
        os.close(os.open("i/%d" % n, os.O_CREAT | os.O_WRONLY)); n += 1
except OSError as e:
    print("stopped", n, errno.errorcode.get(e.errno))`
	up := dqFile{"up.txt", "up"}
	msgs = map[string]string{}
	v, _ = d.call("run_python", map[string]any{"session_id": sid, "code": fill})
	if !strings.Contains(fmt.Sprint(v["stdout"]), "ENOSPC") {
		t.Fatalf("MCP: the run did not meet ENOSPC on inodes: %v", v)
	}
	v, _ = d.call("upload_file", map[string]any{"session_id": sid, "filename": up.name, "content_base64": b64(up.content)})
	msgs["mcp"] = dqQuotaError(t, "MCP upload_file without free inodes", 0, v["error"], v["message"], fmt.Sprint(v))
	if out := playgroundRun(bgctx(), t, base, "dq-keep", fill); !strings.Contains(out.stdout, "ENOSPC") {
		t.Fatalf("playground: the run did not meet ENOSPC on inodes: %s", out)
	}
	status, pv, raw = dqPost(t, base+"/playground/api/upload?conversation=dq-keep", nil, []dqFile{up})
	msgs["playground"] = dqQuotaError(t, "playground upload without free inodes", status, pv["code"], pv["error"], raw)
	dqSame(t, "an upload into a workspace without free inodes", msgs)
}

// dqReport is what a door said of a run that wrote past the quota.
type dqReport struct {
	output string // stdout and stderr
	quota  string // the door's quota_exceeded message ("": none)
	raw    string
}

var dqQuotaLine = regexp.MustCompile(`quota_exceeded: ([^\n]*)`)

// quotaOf is the quota_exceeded message in s ("": none).
func quotaOf(s string) string {
	if m := dqQuotaLine.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// A run that writes past the workspace quota, through every door: on a
// filesystem of its own the program meets ENOSPC ("No space left on
// device") and no door adds anything of its own; on a directory every
// door says quota_exceeded with the same message. Either way the files
// the workspace held before stay, the workspace works, and every door
// lists the same files.
func TestDoorsQuotaRuns(t *testing.T) {
	parallel(t)
	forEachBackend(t, testDoorsQuotaRuns)
}

func testDoorsQuotaRuns(t *testing.T, backend []string) {
	d, fsMode := dqServer(t, backend)
	base, lc := d.base(), d.base()+"/v1/librechat"
	lcKey := map[string]string{"X-API-Key": dqKey}
	keep := dqFile{"keep.txt", "the user's file"}
	fill := `open("big.bin", "wb").write(b"\1" * (12 << 20))`
	reports := map[string]dqReport{}
	listings := map[string]dqListing{}

	// MCP: execute_code in the session upload_file made.
	sid := d.upload("", keep.name, keep.content)
	v, _ := callTool(t, d.c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": fill})
	reports["mcp"] = dqReport{output: fmt.Sprint(v["stdout"], v["stderr"]), quota: quotaOf(fmt.Sprint(v["error"])), raw: dqCut(fmt.Sprint(v))}
	listings["mcp"] = dqMCPList(t, d.c, sid)

	// LibreChat: exec with the uploaded file as its input.
	status, lv, raw := dqPost(t, lc+"/upload", lcKey, []dqFile{keep})
	files, _ := lv["files"].([]any)
	if status != 200 || len(files) != 1 {
		t.Fatalf("LibreChat upload: %d %s", status, raw)
	}
	ref := map[string]any{"id": files[0].(map[string]any)["fileId"], "session_id": lv["session_id"], "name": keep.name}
	status, ev, raw := doorHTTP(bgctx(), t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": fill, "files": []any{ref}}, lcKey)
	esid, _ := ev["session_id"].(string)
	if status != 200 || esid == "" {
		t.Fatalf("LibreChat exec: %d %s", status, dqCut(raw))
	}
	reports["librechat"] = dqReport{output: fmt.Sprint(ev["stdout"], ev["stderr"]), quota: quotaOf(fmt.Sprint(ev["stderr"])), raw: dqCut(raw)}
	var ids map[string]string
	listings["librechat"], ids = dqLCList(t, lc, esid)

	// The playground: a run in a conversation holding the file.
	if status, _, raw := dqPost(t, base+"/playground/api/upload?conversation=dq-run", nil, []dqFile{keep}); status != 200 {
		t.Fatalf("playground upload: %d %s", status, raw)
	}
	pr := playgroundRun(bgctx(), t, base, "dq-run", fill)
	reports["playground"] = dqReport{output: pr.stdout + pr.stderr, quota: quotaOf(pr.stderr), raw: dqCut(pr.raw)}
	listings["playground"] = dqPGList(t, base, "dq-run")

	for door, r := range reports {
		switch fsMode {
		case "filesystem":
			if !strings.Contains(r.output, "No space left on device") {
				t.Errorf("%s: a write past the workspace's filesystem: the program's output lacks ENOSPC (No space left on device): %s", door, r.raw)
			}
		default:
			if !strings.Contains(r.quota, "SANDBOX_WORKSPACE_QUOTA") {
				t.Errorf("%s: a run past the watched quota: want quota_exceeded naming SANDBOX_WORKSPACE_QUOTA: %s", door, r.raw)
			}
		}
		if dqShape(r.quota) != dqShape(reports["mcp"].quota) {
			t.Errorf("%s says of a run past the quota %q; MCP's execute_code says %q", door, r.quota, reports["mcp"].quota)
		}
	}

	// The file the workspace held stays; big.bin stays where the
	// program left it (a filesystem) or was removed (a directory), the
	// same in every door.
	for door, l := range listings {
		if l["keep.txt"] != int64(len(keep.content)) {
			t.Errorf("%s: after the run past the quota keep.txt is not listed with its %d bytes: %v", door, len(keep.content), l)
		}
		if _, ok := l["big.bin"]; ok != (fsMode == "filesystem") {
			t.Errorf("%s: after the run past the quota (%s) big.bin listed: %v: %v", door, fsMode, ok, l)
		}
		if l.without("big.bin").String() != listings["mcp"].without("big.bin").String() {
			t.Errorf("%s lists %v; MCP lists %v", door, l, listings["mcp"])
		}
	}
	if got := dqLCDownload(t, lc, esid, ids["keep.txt"]); got != keep.content {
		t.Errorf("LibreChat: keep.txt reads %q after the run", got)
	}

	// The workspace works: keep.txt reads back through a run in each
	// door.
	read := `print(open("keep.txt").read())`
	if v, _ := callTool(t, d.c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": read}); !strings.Contains(fmt.Sprint(v["stdout"]), keep.content) {
		t.Errorf("MCP: keep.txt after the run: %v", v)
	}
	ref = map[string]any{"id": ids["keep.txt"], "session_id": esid, "name": keep.name}
	if _, ev, raw := doorHTTP(bgctx(), t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": read, "files": []any{ref}}, lcKey); !strings.Contains(fmt.Sprint(ev["stdout"]), keep.content) {
		t.Errorf("LibreChat: keep.txt after the run: %s", dqCut(raw))
	}
	if r := playgroundRun(bgctx(), t, base, "dq-run", read); !strings.Contains(r.stdout, keep.content) {
		t.Errorf("playground: keep.txt after the run: %s", r)
	}
}

// The same files through every door: the same uploads (a nested name, an
// empty file, a name outside ASCII) and the same run (new files in new
// directories, more of them than a LibreChat exec's reply lists, an input
// changed, an input removed) leave the same listing, names and sizes, in
// an MCP session, a LibreChat storage session and a playground
// conversation.
func TestDoorsSameFiles(t *testing.T) {
	parallel(t)
	d, _ := dqServer(t, dataBackends(t)["native"])
	base, lc := d.base(), d.base()+"/v1/librechat"
	lcKey := map[string]string{"X-API-Key": dqKey}
	inputs := []dqFile{{"keep.txt", "the user's file"}, {"sub/notes.txt", "nested notes\n"}, {"empty.txt", ""}, {"résumé.txt", "é"}}
	code := `
import json, os
os.makedirs("out", exist_ok=True)
open("out/result.json", "w").write(json.dumps({"n": 42}))
os.makedirs("many", exist_ok=True)
for i in range(60):
    open("many/f%02d.txt" % i, "w").write("x" * i)
open("keep.txt", "a").write(" and more")
os.remove("empty.txt")
print("done")`
	uploaded, after := map[string]dqListing{}, map[string]dqListing{}

	// MCP.
	sid := ""
	for _, f := range inputs {
		sid = d.upload(sid, f.name, f.content)
	}
	uploaded["mcp"] = dqMCPList(t, d.c, sid)
	if v, _ := callTool(t, d.c, "execute_code", map[string]any{"session_id": sid, "language": "python", "code": code}); !strings.Contains(fmt.Sprint(v["stdout"]), "done") {
		t.Fatalf("MCP run: %v", v)
	}
	after["mcp"] = dqMCPList(t, d.c, sid)

	// LibreChat: a batch upload, then an exec with every file as input.
	status, lv, raw := dqPost(t, lc+"/upload/batch", lcKey, inputs)
	lsid, _ := lv["session_id"].(string)
	if status != 200 || lv["message"] != "success" {
		t.Fatalf("LibreChat batch upload: %d %s", status, raw)
	}
	var ids map[string]string
	uploaded["librechat"], ids = dqLCList(t, lc, lsid)
	var refs []any
	for _, f := range inputs {
		refs = append(refs, map[string]any{"id": ids[f.name], "session_id": lsid, "name": f.name})
	}
	status, ev, raw := doorHTTP(bgctx(), t, "POST", lc+"/exec", map[string]any{"lang": "py", "code": code, "files": refs}, lcKey)
	esid, _ := ev["session_id"].(string)
	if status != 200 || !strings.Contains(fmt.Sprint(ev["stdout"]), "done") {
		t.Fatalf("LibreChat exec: %d %s", status, dqCut(raw))
	}
	after["librechat"], ids = dqLCList(t, lc, esid)
	if got := dqLCDownload(t, lc, esid, ids["keep.txt"]); got != "the user's file and more" {
		t.Errorf("LibreChat: keep.txt after the exec reads %q", got)
	}
	// The exec's reply lists what it created or changed (50 of the 62),
	// by the names the listing gives them.
	fl, _ := ev["files"].([]any)
	if len(fl) != 50 {
		t.Errorf("LibreChat exec reports %d files, want 50 of the 62 it created or changed: %s", len(fl), dqCut(raw))
	}
	for _, f := range fl {
		n := fmt.Sprint(f.(map[string]any)["name"])
		if n != "keep.txt" && n != "out/result.json" && !strings.HasPrefix(n, "many/f") {
			t.Errorf("LibreChat exec reports %s, which it did not create or change", n)
		}
	}

	// The playground.
	if status, _, raw := dqPost(t, base+"/playground/api/upload?conversation=dq-same", nil, inputs); status != 200 {
		t.Fatalf("playground upload: %d %s", status, raw)
	}
	uploaded["playground"] = dqPGList(t, base, "dq-same")
	if r := playgroundRun(bgctx(), t, base, "dq-same", code); !strings.Contains(r.stdout, "done") {
		t.Fatalf("playground run: %s", r)
	}
	after["playground"] = dqPGList(t, base, "dq-same")

	want := dqListing{"keep.txt": 15, "sub/notes.txt": 13, "empty.txt": 0, "résumé.txt": 2}
	for door, l := range uploaded {
		if l.String() != want.String() {
			t.Errorf("%s lists the uploaded files as %v, want %v", door, l, want)
		}
	}
	want = dqListing{"keep.txt": 24, "sub/notes.txt": 13, "résumé.txt": 2, "out/result.json": 9}
	for i := 0; i < 60; i++ {
		want[fmt.Sprintf("many/f%02d.txt", i)] = int64(i)
	}
	for door, l := range after {
		if l.String() != want.String() {
			t.Errorf("%s lists the files after the run as %v, want %v", door, l, want)
		}
	}
}
