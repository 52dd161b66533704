// Package downloads owns srt-mcp's signed download links: the URLs every
// door hands out for a session's files (seed 003 §9's HMAC over
// "session/filename" with an expiry inside the MAC), the secret they are
// signed with, and the GET /files/{session_id}/{filename} route that
// serves them. The signed URL is the credential: the route needs no
// other authentication, and never follows a link in the workspace.
package downloads

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/sessions"
)

// Signer makes and checks download URLs: seed 003 §9's HMAC-SHA256
// over "session/filename", with an expiry inside the MAC:
//
//	/files/{session_id}/{filename}?exp={unix seconds}&sig=hex(HMAC(secret, session_id + "/" + filename + "\n" + exp))
type Signer struct {
	Secret  []byte
	BaseURL string        // PUBLIC_BASE_URL, or the listener's own URL
	TTL     time.Duration // how long a URL stays valid (default 24h)
}

func (f *Signer) mac(sessionID, filename, exp string) string {
	m := hmac.New(sha256.New, f.Secret)
	m.Write([]byte(sessionID + "/" + filename + "\n" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// URL returns a signed, expiring download URL.
func (f *Signer) URL(sessionID, filename string) string {
	ttl := f.TTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	exp := strconv.FormatInt(time.Now().Add(ttl).Unix(), 10)
	segs := strings.Split(filename, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fmt.Sprintf("%s/files/%s/%s?exp=%s&sig=%s", strings.TrimRight(f.BaseURL, "/"), url.PathEscape(sessionID),
		strings.Join(segs, "/"), exp, f.mac(sessionID, filename, exp))
}

// Verify checks a signature (constant time) and the expiry.
func (f *Signer) Verify(sessionID, filename, exp, sig string) error {
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return errors.New("missing or malformed exp")
	}
	if !hmac.Equal([]byte(sig), []byte(f.mac(sessionID, filename, exp))) {
		return errors.New("bad signature")
	}
	if time.Now().Unix() > n {
		return errors.New("the link has expired")
	}
	return nil
}

// LoadOrCreateSecret returns the configured secret, or one persisted (0600)
// in stateDir, generated on first use.
func LoadOrCreateSecret(configured, stateDir string) ([]byte, error) {
	if configured != "" {
		return []byte(configured), nil
	}
	p := filepath.Join(stateDir, "file-secret")
	if b, err := os.ReadFile(p); err == nil && len(b) >= 32 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	secret := []byte(hex.EncodeToString(b))
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(stateDir, ".file-secret-*")
	if err != nil {
		return nil, err
	}
	if _, err := tmp.Write(secret); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	tmp.Close()
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return nil, err
	}
	return secret, nil
}

// Handler serves GET /files/{session_id}/{filename...} from reg's
// sessions, for URLs signed by f (nil: every request is 404).
func Handler(f *Signer, reg *sessions.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f == nil || reg == nil {
			http.NotFound(w, r)
			return
		}
		rest := strings.TrimPrefix(r.URL.Path, "/files/")
		sessionID, filename, ok := strings.Cut(rest, "/")
		if !ok || sessionID == "" || filename == "" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if err := f.Verify(sessionID, filename, q.Get("exp"), q.Get("sig")); err != nil {
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		ss, err := reg.Get(sessionID)
		if err != nil {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		rel, err := sessions.CleanName(filename)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fh, info, err := ss.Open(rel)
		if err != nil {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		defer fh.Close()
		w.Header().Set("Content-Type", info.MIME)
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(rel)}))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "private, no-store")
		http.ServeContent(w, r, "", info.ModTime, fh)
	})
}
