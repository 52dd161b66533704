// Package downloads is the door of srt-mcp's signed download links: GET
// /files/{session_id}/{filename}?exp=…&inc=…&sig=… serves a workspace file
// to whoever holds a link the service signed (seed 003 §9's HMAC, with an
// expiry and the session's incarnation inside the MAC; see
// service.Signer). The signed URL is the credential: the route needs no
// other authentication, a link dies with the session it was made for, and
// the file is opened without following a link a sandbox planted.
package downloads

import (
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/service"
)

// Handler serves GET /files/{session_id}/{filename...}: 403 for a bad or
// expired signature, 404 for a session that ended or a file that is gone.
func Handler(svc *service.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/files/")
		sessionID, filename, ok := strings.Cut(rest, "/")
		if !ok || sessionID == "" || filename == "" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		fh, info, err := svc.OpenSigned(sessionID, filename, q.Get("exp"), q.Get("inc"), q.Get("sig"))
		if err != nil {
			e := errs.Of(err)
			msg := e.Detail()
			switch e.Code {
			case errs.Forbidden:
				msg = "forbidden: " + msg
			case errs.NotFound, errs.SessionNotFound:
				msg = "no such file"
			}
			http.Error(w, msg, e.Status())
			return
		}
		defer fh.Close()
		w.Header().Set("Content-Type", info.MIME)
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(info.Name)}))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "private, no-store")
		http.ServeContent(w, r, "", info.ModTime, fh)
	})
}
