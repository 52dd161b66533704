package service

// File operations, the same for every door: upload (one budgeted loop for
// every multipart form, and single files), read, open, list with signed
// URLs, remove. Each works on a workspace its caller holds, never through
// a link a sandbox planted (package sessions resolves every name one
// component at a time), and writes an audit line. A name a sandbox made
// reaches a door only made safe to show (sessions.SafeName).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/sessions"
)

// WorkspaceMount is where a workspace appears in its sandboxes.
const WorkspaceMount = sessions.WorkspaceMount

// File is a workspace file as a door shows it.
type File struct {
	Path    string // /mnt/data/Name
	Name    string // relative to /mnt/data; a name a sandbox made with control characters in it is escaped (see Fetchable)
	Size    int64
	MIME    string
	ModTime time.Time
	// URL is its signed download link ("" without a signer, or when the
	// file cannot be fetched by name).
	URL string
	// Fetchable: the name is the file's own (nothing was escaped), so the
	// file can be read, downloaded and removed by it.
	Fetchable bool
}

// file is f as a door shows it, with a download URL for ss's incarnation.
func (s *Service) file(ss *sessions.Session, f sessions.FileInfo) File {
	name, safe := sessions.SafeName(f.Filename)
	_, bad := sessions.CleanName(f.Filename)
	out := File{Path: WorkspaceMount + "/" + name, Name: name, Size: f.Size, MIME: f.MIME, ModTime: f.ModTime, Fetchable: safe && bad == nil}
	if out.Fetchable && s.cfg.Files != nil {
		out.URL = s.cfg.Files.URL(ss.ID, ss.Incarnation, f.Filename)
	}
	return out
}

// What one reply lists of a workspace: a run can make 100,000 files with
// long names, and a reply (and the server building it) must not grow
// with them. Past either bound the listing stops and says how many more
// files there are.
const (
	maxListedFiles = 1000
	maxListedBytes = 1 << 20 // of names, as shown
	// maxArtifacts is what a run's reply lists of the files it made.
	maxArtifacts = 200
)

// files is infos as a door shows them, at most max of them and
// maxListedBytes of names; more is how many were left out. When some must
// be left out, the shallowest are kept (in infos' order): a run that makes
// thousands of files in a directory that sorts first must not push the
// files beside them out of sight (the report it wrote, the user's input).
func (s *Service) files(ss *sessions.Session, infos []sessions.FileInfo, max int) (out []File, more int) {
	out = make([]File, 0, min(len(infos), max))
	size := 0
	for _, f := range infos {
		ff := s.file(ss, f)
		if size += len(ff.Path); len(out) >= max || size > maxListedBytes {
			out = s.shallowest(ss, infos, max)
			return out, len(infos) - len(out)
		}
		out = append(out, ff)
	}
	return out, 0
}

// shallowest is files' choice past a bound: the files nearest the top of
// the workspace that fit, shown in infos' order.
func (s *Service) shallowest(ss *sessions.Session, infos []sessions.FileInfo, max int) []File {
	order := make([]int, len(infos))
	for i := range order {
		order[i] = i
	}
	depth := func(i int) int { return strings.Count(infos[i].Filename, "/") }
	sort.SliceStable(order, func(a, b int) bool { return depth(order[a]) < depth(order[b]) })
	kept := map[int]File{}
	size := 0
	for _, i := range order {
		ff := s.file(ss, infos[i])
		if size += len(ff.Path); len(kept) >= max || size > maxListedBytes {
			break
		}
		kept[i] = ff
	}
	out := make([]File, 0, len(kept))
	for i := range infos {
		if ff, ok := kept[i]; ok {
			out = append(out, ff)
		}
	}
	return out
}

// FileURL is the signed download link of name in w ("" without a
// signer).
func (s *Service) FileURL(w *Workspace, name string) string {
	if s.cfg.Files == nil {
		return ""
	}
	return s.cfg.Files.URL(w.ss.ID, w.ss.Incarnation, name)
}

// Files lists the regular files of w with their download URLs: at most a
// thousand, and a megabyte of names; more says how many it left out.
func (s *Service) Files(c Caller, w *Workspace, op string) (files []File, more int) {
	files, more = s.files(w.ss, w.ss.List(), maxListedFiles)
	s.audit(c, w.ss, map[string]any{"op": op, "files": len(files), "more": more})
	return files, more
}

// audit writes one audit line of c's operation in ss.
func (s *Service) audit(c Caller, ss *sessions.Session, v map[string]any) {
	if c.Principal != "" {
		v["principal"] = c.Principal
	}
	s.Audit(ss, v)
}

// cleanName is a caller's file name or /mnt/data path as a workspace path.
func cleanName(name string) (string, error) { return sessions.CleanName(name) }

// ReadFile reads a regular file of w of at most max bytes (0: the
// server's read limit): artifact_too_large beyond, with its File (and
// download URL) so the door can say where to get it instead.
func (s *Service) ReadFile(c Caller, w *Workspace, op, name string, max int64) ([]byte, File, error) {
	if max <= 0 {
		max = s.cfg.MaxArtifactRead
	}
	rel, err := cleanName(name)
	if err != nil {
		s.audit(c, w.ss, map[string]any{"op": op, "path": safe(name), "error": errs.CodeOf(err)})
		return nil, File{}, err
	}
	data, info, err := w.ss.ReadFile(rel, max)
	if err != nil {
		s.audit(c, w.ss, map[string]any{"op": op, "path": safe(name), "error": errs.CodeOf(err)})
		if errs.Has(err, errs.ArtifactTooLarge) {
			return nil, s.file(w.ss, info), err
		}
		return nil, File{}, err
	}
	s.audit(c, w.ss, map[string]any{"op": op, "path": info.Path, "size_bytes": info.Size})
	return data, s.file(w.ss, info), nil
}

// OpenFile opens a regular file of w for reading (a download).
func (s *Service) OpenFile(c Caller, w *Workspace, op, name string) (*os.File, File, error) {
	rel, err := cleanName(name)
	if err != nil {
		return nil, File{}, err
	}
	f, info, err := w.ss.Open(rel)
	if err != nil {
		s.audit(c, w.ss, map[string]any{"op": op, "path": safe(name), "error": errs.CodeOf(err)})
		return nil, File{}, err
	}
	s.audit(c, w.ss, map[string]any{"op": op, "path": info.Path, "size_bytes": info.Size})
	return f, s.file(w.ss, info), nil
}

// OpenSigned opens the file a signed download URL names: the signature
// and expiry first (forbidden), then the session, which must be the
// incarnation the URL was made for (not_found otherwise, as for a file
// that is gone).
func (s *Service) OpenSigned(sessionID, name, exp, inc, sig string) (*os.File, File, error) {
	if s.cfg.Files == nil {
		return nil, File{}, errs.New(errs.NotFound, "no such file")
	}
	if err := s.cfg.Files.Verify(sessionID, name, exp, inc, sig); err != nil {
		return nil, File{}, err
	}
	ss, err := s.reg.Get(sessionID)
	if err != nil || ss.Incarnation != inc {
		return nil, File{}, errs.New(errs.NotFound, "no such session: the link's session has ended")
	}
	if err := CheckName(name); err != nil {
		return nil, File{}, err
	}
	f, info, err := s.OpenFile(Caller{Principal: "signed-url"}, wrap(ss), "download", name)
	if err != nil {
		// Whatever stands where the file was (a link a run planted, a
		// FIFO, nothing): the link serves nothing, and says no more.
		return nil, File{}, errs.New(errs.NotFound, "no such file")
	}
	return f, info, nil
}

// WriteFile stores data at name in w (atomically, never through a link)
// if it fits the workspace quota; it holds the workspace meanwhile (a run
// in it makes this session_busy) and returns the file's /mnt/data path.
func (s *Service) WriteFile(c Caller, w *Workspace, op, name string, data []byte, overwrite bool) (string, error) {
	if err := w.ss.Acquire(); err != nil {
		return "", err
	}
	defer w.ss.Release()
	return s.writeHeld(c, w.ss, op, name, data, overwrite)
}

// writeHeld is WriteFile in a session the caller holds.
func (s *Service) writeHeld(c Caller, ss *sessions.Session, op, name string, data []byte, overwrite bool) (string, error) {
	if int64(len(data)) > s.cfg.MaxUploadBytes {
		err := errs.OnField(errs.TooLarge, "file", safe(name), fmt.Sprintf("is %d bytes, more than the %d-byte limit (SANDBOX_MAX_UPLOAD_BYTES)", len(data), s.cfg.MaxUploadBytes))
		s.audit(c, ss, map[string]any{"op": op, "path": safe(name), "size_bytes": len(data), "error": err.Code})
		return "", err
	}
	rel, err := cleanName(name)
	if err == nil {
		err = s.fitsQuota(ss, rel, int64(len(data)))
	}
	var p string
	if err == nil {
		p, err = ss.WriteFile(rel, data, overwrite)
	}
	if err != nil {
		s.audit(c, ss, map[string]any{"op": op, "path": safe(name), "size_bytes": len(data), "error": errs.CodeOf(err)})
		return "", err
	}
	s.audit(c, ss, map[string]any{"op": op, "path": p, "size_bytes": len(data), "sha256": SHA256(data)})
	s.idleKeep(ss, p)
	return p, nil
}

// fitsQuota refuses a write of n bytes at rel that would take the
// workspace past its quota.
func (s *Service) fitsQuota(ss *sessions.Session, rel string, n int64) error {
	q := s.cfg.WorkspaceQuota
	if q <= 0 {
		return nil
	}
	if _, _, ok := ss.Space(); ok {
		return nil // the workspace's filesystem refuses what does not fit (WriteFile says so)
	}
	u, err := ss.Usage()
	if err != nil {
		return err
	}
	old := int64(0)
	if f, info, err := ss.Open(rel); err == nil {
		old = info.Size
		f.Close()
	}
	if after := u.Bytes - old + n; after > q || u.Over {
		return errs.New(errs.QuotaExceeded, "%s (%s) does not fit: the workspace holds %s of its %s quota (SANDBOX_WORKSPACE_QUOTA); delete files first",
			rel, human(n), human(u.Bytes), human(q))
	}
	return nil
}

// RemoveFile deletes a file of w (never through a link).
func (s *Service) RemoveFile(c Caller, w *Workspace, op, name string) error {
	rel, err := cleanName(name)
	if err != nil {
		return err
	}
	if err := w.ss.Acquire(); err != nil {
		return err
	}
	defer w.ss.Release()
	err = w.ss.Remove(rel)
	v := map[string]any{"op": op, "path": WorkspaceMount + "/" + rel}
	if err != nil {
		v["error"] = errs.CodeOf(err)
	}
	s.audit(c, w.ss, v)
	return err
}

// UploadOptions says how an upload form is stored.
type UploadOptions struct {
	Op        string // the audit op
	Overwrite bool
	// KeepGoing: a file that cannot be stored is reported in its Uploaded
	// and the others are stored (LibreChat's batch upload); otherwise the
	// first one ends the upload with its error.
	KeepGoing bool
}

// Uploaded is one file of an upload form.
type Uploaded struct {
	Name string // the name it was sent with (made safe to show), its directories included
	Path string // where it was stored (/mnt/data/...), "" when it was not
	Size int64
	MIME string
	Err  *errs.Error
}

// UploadReport is what an upload form stored: its files in order, and its
// other fields (at most 4 KiB each).
type UploadReport struct {
	Files  []Uploaded
	Fields map[string]string
}

// Upload limits of one request (SANDBOX_MAX_UPLOAD_BYTES bounds one file
// and the request's files together).
const (
	maxUploadParts  = 100
	maxUploadFields = 32
	maxFieldBytes   = 4096
)

// UploadForm stores the files of a multipart form in w: one budget for
// every door (at most 100 parts, 32 other fields, and the upload limit in
// all), each file written atomically within the workspace quota, and
// audited. The workspace is held for the whole form.
func (s *Service) UploadForm(c Caller, w *Workspace, mr *multipart.Reader, o UploadOptions) (UploadReport, error) {
	rep := UploadReport{Fields: map[string]string{}}
	if err := w.ss.Acquire(); err != nil {
		return rep, err
	}
	defer w.ss.Release()
	limit := s.cfg.MaxUploadBytes
	var parts, fields int
	var total int64
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return rep, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return rep, errs.New(errs.TooLarge, "the request body is larger than the server takes (SANDBOX_MAX_UPLOAD_BYTES and 1 MiB)")
			}
			return rep, errs.New(errs.InvalidArguments, "malformed multipart body: %v", err)
		}
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name := params["filename"] // with its directories (Part.FileName drops them)
		if parts++; parts > maxUploadParts {
			return rep, errs.New(errs.TooLarge, "too many parts in one upload (at most %d); send the files in several requests", maxUploadParts)
		}
		if name == "" {
			if fields++; fields > maxUploadFields {
				return rep, errs.New(errs.TooLarge, "too many form fields in one upload (at most %d)", maxUploadFields)
			}
			b, _ := io.ReadAll(io.LimitReader(part, maxFieldBytes))
			rep.Fields[part.FormName()] = string(b)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		if err != nil {
			return rep, errs.New(errs.InvalidArguments, "reading %s: %v", safe(name), err)
		}
		up := Uploaded{Name: safe(name), Size: int64(len(data)), MIME: sessions.MIMEType(name)}
		if int64(len(data)) > limit {
			up.Err = errs.OnField(errs.TooLarge, "file", safe(name), fmt.Sprintf("is larger than %d bytes (SANDBOX_MAX_UPLOAD_BYTES)", limit))
		} else if total += int64(len(data)); total > limit {
			return rep, errs.New(errs.TooLarge, "the files of one upload total more than %d bytes (SANDBOX_MAX_UPLOAD_BYTES); send them in several requests", limit)
		} else if p, err := s.writeHeld(c, w.ss, o.Op, name, data, o.Overwrite); err != nil {
			up.Err = errs.Of(err)
		} else {
			up.Path = p
		}
		rep.Files = append(rep.Files, up)
		if up.Err != nil && !o.KeepGoing {
			return rep, up.Err
		}
	}
}

// safe is a caller's or a sandbox's name made safe to show.
func safe(name string) string {
	s, _ := sessions.SafeName(name)
	return s
}

// Meta reads a door's metadata of w (key: what it is, e.g.
// "librechat-index"): kept beside the workspace, where no sandbox reaches.
func (s *Service) Meta(w *Workspace, key string, v any) error {
	b, err := os.ReadFile(metaPath(w.ss, key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// SetMeta stores a door's metadata of w, atomically.
func (s *Service) SetMeta(w *Workspace, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p := metaPath(w.ss, key)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func metaPath(ss *sessions.Session, key string) string {
	return filepath.Join(ss.Dir, strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '.' {
			return '_'
		}
		return r
	}, key)+".json")
}

// CheckName refuses a file name or /mnt/data path a caller gives that
// names no file inside the workspace (traversal, absolute paths elsewhere,
// NUL, control or direction-changing characters), before anything is
// stored for it.
func CheckName(name string) error {
	_, err := cleanName(name)
	return err
}
