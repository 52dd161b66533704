package service

// Signed download links: the URLs every door hands out for a workspace's
// files (seed 003 §9's HMAC over "session/filename", with an expiry and the
// session's incarnation inside the MAC), and the secret they are signed
// with. The URL is the credential: GET /files/... needs no other
// authentication, and a link dies with the session it was made for (a
// later session under the same id, by anyone, is another incarnation).

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/srt-mcp/srt-mcp/errs"
	"github.com/srt-mcp/srt-mcp/opfile"
)

// Signer makes and checks download URLs:
//
//	/files/{session_id}/{filename}?exp={unix seconds}&inc={incarnation}&sig=hex(HMAC-SHA256(secret,
//	    session_id + "/" + filename + "\n" + exp + "\n" + incarnation))
type Signer struct {
	Secret  []byte
	BaseURL string        // PUBLIC_BASE_URL, or the listener's own URL
	TTL     time.Duration // how long a URL stays valid (default 24h)
}

func (f *Signer) mac(sessionID, filename, exp, inc string) string {
	m := hmac.New(sha256.New, f.Secret)
	m.Write([]byte(sessionID + "/" + filename + "\n" + exp + "\n" + inc))
	return hex.EncodeToString(m.Sum(nil))
}

// URL returns a signed, expiring download URL for filename in the
// incarnation inc of session sessionID.
func (f *Signer) URL(sessionID, inc, filename string) string {
	ttl := f.TTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	exp := strconv.FormatInt(time.Now().Add(ttl).Unix(), 10)
	segs := strings.Split(filename, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fmt.Sprintf("%s/files/%s/%s?exp=%s&inc=%s&sig=%s", strings.TrimRight(f.BaseURL, "/"), url.PathEscape(sessionID),
		strings.Join(segs, "/"), exp, inc, f.mac(sessionID, filename, exp, inc))
}

// Verify checks a signature (constant time), then the expiry: forbidden
// either way, before anything about the session is looked up.
func (f *Signer) Verify(sessionID, filename, exp, inc, sig string) error {
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return errs.New(errs.Forbidden, "missing or malformed exp")
	}
	if !hmac.Equal([]byte(sig), []byte(f.mac(sessionID, filename, exp, inc))) {
		return errs.New(errs.Forbidden, "bad signature")
	}
	if time.Now().Unix() > n {
		return errs.New(errs.Forbidden, "the link has expired")
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
	if b, err := opfile.ReadServerFile(p, 4096); err == nil && len(b) >= 32 {
		return b, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the download-signing secret %s: %v", p, err)
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
