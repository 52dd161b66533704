// Package tlsca is the egress proxy's interception CA (made once and kept,
// or the operator's) and the trust a sandbox gets from it: the leaf
// certificates a terminated tunnel presents, and the bundle of the host's
// roots, the CA and the operator's extra CAs (certificates only, never a
// key) that tools inside the sandbox verify against.
package tlsca

import (
	"bytes"
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// CA mints the leaf certificates a terminated tunnel presents. Leaves
// share one key per CA (srt does the same) and the most recently used
// names' leaves are kept.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	leafKey *ecdsa.PrivateKey

	mu    sync.Mutex
	lru   *list.List // of *leafEntry, most recent first
	byKey map[string]*list.Element
}

type leafEntry struct {
	name string
	cert *tls.Certificate
}

// maxLeaves is how many leaves a CA keeps.
const maxLeaves = 256

// NewCA makes a CA for one server (or one srt-mcp exec): an ECDSA P-256
// key and a certificate that may sign leaves only.
func NewCA() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "srt-mcp egress CA (" + host + ")", Organization: []string{"srt-mcp"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// ParseCA reads a CA certificate and its key (PEM; PKCS#8, EC or RSA).
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the TLS interception CA: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("the TLS interception CA: %v", err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the TLS interception CA's certificate is not a CA that may sign certificates (basicConstraints CA:TRUE, keyUsage keyCertSign)")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("the TLS interception CA's key cannot sign")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	return &CA{cert: cert, key: signer, certPEM: pem.EncodeToMemory(block), leafKey: leafKey, lru: list.New(), byKey: map[string]*list.Element{}}, nil
}

// CertPEM is the CA's certificate (never its key): what the sandbox trusts.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Leaf returns a certificate for name (a DNS name or an IP address),
// minting it if it is not kept.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	if e, ok := ca.byKey[name]; ok {
		ca.lru.MoveToFront(e)
		c := e.Value.(*leafEntry).cert
		ca.mu.Unlock()
		return c, nil
	}
	ca.mu.Unlock()
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if e, ok := ca.byKey[name]; ok {
		return e.Value.(*leafEntry).cert, nil
	}
	ca.byKey[name] = ca.lru.PushFront(&leafEntry{name: name, cert: c})
	for ca.lru.Len() > maxLeaves {
		old := ca.lru.Remove(ca.lru.Back()).(*leafEntry)
		delete(ca.byKey, old.name)
	}
	return c, nil
}

// Leaves reports how many leaves are kept (tests, metrics).
func (ca *CA) Leaves() int {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.lru.Len()
}

// CA file names in a server's state directory.
const (
	CACertFile = "egress-ca.pem"
	CAKeyFile  = "egress-ca-key.pem"
)

// LoadOrCreateCA returns the CA kept in dir, making it on first use: the
// key 0600 and the certificate 0644, each written whole (a temporary file
// renamed into place). An existing key that others may read, or either
// file a symlink, is refused: whoever reads the key can mint certificates
// every sandbox trusts.
func LoadOrCreateCA(dir string) (certPEM, keyPEM []byte, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if st, err := os.Lstat(dir); err != nil {
		return nil, nil, err
	} else if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || st.Mode().Perm()&0o077 != 0 || (ok && int(sys.Uid) != os.Geteuid()) {
		return nil, nil, fmt.Errorf("%s: the egress CA's directory must be a directory of srt-mcp's user that no one else may use (mode %v); remove it to have it made again", dir, st.Mode().Perm())
	}
	// Runs starting together on a fresh directory must not each make a
	// CA (one's key kept beside another's certificate): one makes it,
	// under the directory's lock, and the others read it.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, nil, err
	}
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	keyPEM, kerr := readPrivate(keyPath)
	certPEM, cerr := readNoFollow(certPath)
	if kerr == nil && cerr == nil {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, nil, fmt.Errorf("%s: the egress CA's certificate and key do not belong together (%v); remove the directory to make a new CA", dir, err)
		}
		return certPEM, keyPEM, nil
	}
	if !errors.Is(kerr, os.ErrNotExist) && kerr != nil {
		return nil, nil, kerr
	}
	if !errors.Is(cerr, os.ErrNotExist) && cerr != nil {
		return nil, nil, cerr
	}
	if certPEM, keyPEM, err = NewCA(); err != nil {
		return nil, nil, err
	}
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// LoadCAFiles reads the operator's CA (caCertPath, caKeyPath).
func LoadCAFiles(certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(certPath); err != nil {
		return nil, nil, fmt.Errorf("network.tlsTerminate.caCertPath: %v", err)
	}
	f, err := os.Open(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("network.tlsTerminate.caKeyPath: %v", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Mode().Perm()&0o077 != 0 {
		return nil, nil, fmt.Errorf("network.tlsTerminate.caKeyPath %s: a key others may read is not used (whoever reads it can mint certificates every sandbox trusts); chmod 600 it", keyPath)
	} else if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return nil, nil, fmt.Errorf("network.tlsTerminate.caKeyPath %s belongs to uid %d, who could replace it: use a key of root's or of srt-mcp's user", keyPath, sys.Uid)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, nil, fmt.Errorf("network.tlsTerminate.caKeyPath: %v", err)
	}
	return certPEM, b.Bytes(), nil
}

func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: the egress CA's key must be a regular file only its owner may read (mode %v); fix it with chmod 600", path, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s: the egress CA's key belongs to uid %d, not to srt-mcp's uid %d", path, sys.Uid, os.Geteuid())
	}
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-ca-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// systemBundles are where distributions keep the roots every TLS library
// reads (Debian/Ubuntu/Alpine, Fedora/RHEL, openSUSE, macOS and the BSDs).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// SystemBundle returns the host's root bundle's path and content.
func SystemBundle() (string, []byte) {
	for _, p := range systemBundles {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return p, b
		}
	}
	return "", nil
}

// CertificatesOnly keeps the CERTIFICATE blocks of PEM data: a combined
// file's private key never reaches a sandbox.
func CertificatesOnly(data []byte) []byte {
	var out bytes.Buffer
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out.Bytes()
		}
		if b.Type == "CERTIFICATE" && len(b.Headers) == 0 {
			_ = pem.Encode(&out, b)
		}
	}
}

// ExtraCertificates reads extraCaCertPaths: the CERTIFICATE blocks of each
// file; missing, unreadable or certificate-less files are skipped (srt's
// rule: a path may exist on some hosts only).
func ExtraCertificates(paths []string) []byte {
	var out []byte
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, CertificatesOnly(b)...)
		}
	}
	return out
}

// TrustBundle is what a sandbox trusts when its tunnels are terminated:
// the host's roots (certificates only), the interception CA and the
// operator's extra CAs.
func TrustBundle(caPEM []byte, extraPaths []string) []byte {
	_, sys := SystemBundle()
	var b bytes.Buffer
	b.Write(CertificatesOnly(sys))
	b.WriteString("# srt-mcp egress CA: the proxy's certificates for terminated tunnels\n")
	b.Write(CertificatesOnly(caPEM))
	b.Write(ExtraCertificates(extraPaths))
	return b.Bytes()
}

// UpstreamRoots are the roots upstream servers are verified against: the
// host's and the operator's extra CAs.
func UpstreamRoots(extraPaths []string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if extra := ExtraCertificates(extraPaths); len(extra) > 0 {
		pool.AppendCertsFromPEM(extra)
	}
	return pool, nil
}

// bundleKeep is how long an unused trust bundle stays: a run that found
// one touches it, so only bundles no run has started with for this long
// (an old CA's, an old extraCaCertPaths') are removed. A day: longer than
// a run lasts, so a Docker run (which reads the bundle by path, not
// through a mount) never loses it midway.
const bundleKeep = 24 * time.Hour

// WriteBundle keeps bundle in dir under a name made from its content
// (written whole, 0644: certificates only) and returns its path. Bundles
// no run has used within bundleKeep are removed.
func WriteBundle(dir string, bundle []byte) (string, error) {
	sum := sha256.Sum256(bundle)
	path := filepath.Join(dir, "trust-"+hex.EncodeToString(sum[:8])+".pem")
	now := time.Now()
	if cur, err := readNoFollow(path); err == nil && bytes.Equal(cur, bundle) {
		_ = os.Chtimes(path, now, now)
	} else if err := writeAtomic(path, bundle, 0o644); err != nil {
		return "", err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "trust-*.pem"))
	for _, o := range old {
		if fi, err := os.Lstat(o); err == nil && o != path && now.Sub(fi.ModTime()) > bundleKeep {
			os.Remove(o)
		}
	}
	return path, nil
}
