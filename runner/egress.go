package runner

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
	"github.com/srt-mcp/srt-mcp/tlsca"
)

// EgressMaterial is what the egress proxy needs that the sandbox must
// never see: the interception CA's key and the real values of masked
// credentials. It travels only in the spec message to the runner (a pipe),
// is held in the runner's memory, and is never logged or written down.
type EgressMaterial struct {
	CACert  []byte               `json:"ca_cert,omitempty"`
	CAKey   []byte               `json:"ca_key,omitempty"`
	Secrets []credentials.Secret `json:"secrets,omitempty"`
}

// EgressConfig is what one execution's egress filter is started with.
type EgressConfig struct {
	Network policy.Network
	// Token is the per-execution proxy password.
	Token string
	// CACert and CAKey terminate TLS (network.tls_terminate); nil: none.
	CACert, CAKey []byte
	// Secrets are the masked credentials, stand-ins minted.
	Secrets []credentials.Secret
	// AllowPlaintextInject is credentials.allow_plaintext_inject.
	AllowPlaintextInject bool
}

// TrustEnv are the variables tools read for their roots instead of the
// system's (or besides it: NODE_EXTRA_CA_CERTS): each points at the
// sandbox's bundle when tunnels are terminated.
var TrustEnv = []string{
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT",
	"GIT_SSL_CAINFO", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE", "npm_config_cafile", "DENO_CERT",
	"HEX_CACERTS_PATH", "NIX_SSL_CERT_FILE",
}

// sandboxBundlePath is where the sandbox finds its roots: the system
// bundle's own path (so a tool that reads no variable trusts it too), or a
// fixed path in the sandbox's /tmp on a host without a known one.
func sandboxBundlePath() string {
	if p, _ := tlsca.SystemBundle(); p != "" && policy.Within(p, "/etc") {
		return p
	}
	return SandboxTmp + "/.srt-mcp-ca-bundle.pem"
}

// egressPrep is what Start adds to a run for termination and credentials.
type egressPrep struct {
	overlay []ExtraMount      // files bound over the view: the bundle, masked files' stand-ins
	env     map[string]string // set in the sandbox's environment
	drop    []string          // removed from it (denied credentials)
	deny    []string          // host paths hidden (denied credential files)
	secrets []credentials.Secret
	cleanup []string // files to remove when the run ends
	// operator are the operator's files the proxy trusts or the sandbox
	// must not change: masked credential files, extraCaCertPaths, the
	// CA's files. None may lie in a path the run may write.
	operator []struct{ field, path string }
}

// realPath is path with its links resolved (as it is where the sandbox
// could reach it), or path when it cannot be resolved.
func realPath(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// checkPlan refuses a run that could change a file the proxy trusts: a
// masked credential file it could move away (its next run would read
// the stand-in's neighbour, or a decoy, as the value), an extra CA it
// could replace (the proxy would trust the sandbox's upstream).
func (p *egressPrep) checkPlan(plan *Plan) error {
	for _, o := range p.operator {
		for _, w := range plan.Writable {
			if policy.Within(o.path, w.Src) || policy.Within(o.path, w.Dst) {
				return errorf(ErrCodeInvalidPolicy, "%s %s lies inside %s, which this run may write: a run could replace or move it; keep it out of every writable path", o.field, o.path, w.Dst)
			}
		}
	}
	return nil
}

// prepareEgress mints the stand-ins, writes the trust bundle and the
// masked files' stand-ins into the runner's private cache, and says what
// the sandbox sees instead of the real things.
func prepareEgress(s *Spec, cache, home string, proxy bool) (*egressPrep, error) {
	p := &egressPrep{env: map[string]string{}}
	n := s.Policy.Network
	var m EgressMaterial
	if s.Egress != nil {
		m = *s.Egress
	}
	if t := n.TLSTerminate; t != nil {
		for i, x := range t.ExtraCACertPaths {
			p.operator = append(p.operator, struct{ field, path string }{fmt.Sprintf("network.tlsTerminate.extraCaCertPaths[%d]", i), realPath(policy.ExpandPath(x, "/", home))})
		}
		if t.CAKeyPath != "" {
			key := policy.ExpandPath(t.CAKeyPath, "/", home)
			p.deny = append(p.deny, key) // never in the sandbox's view
			p.operator = append(p.operator, struct{ field, path string }{"network.tlsTerminate.caKeyPath", realPath(key)},
				struct{ field, path string }{"network.tlsTerminate.caCertPath", realPath(policy.ExpandPath(t.CACertPath, "/", home))})
		}
	}
	if n.TLSTerminate != nil && proxy && len(n.AllowedDomains) > 0 {
		if len(m.CACert) == 0 || len(m.CAKey) == 0 {
			return nil, errorf(ErrCodeInvalidSpec, "network.tls_terminate is set but the spec carries no CA")
		}
		if cache == "" {
			return nil, errorf(ErrCodeUnavailable, "TLS termination needs a private cache directory for the sandbox's trust bundle (set XDG_RUNTIME_DIR or HOME)")
		}
		bundle := tlsca.TrustBundle(tlsca.CertificatesOnly(m.CACert), n.TLSTerminate.ExtraCACertPaths)
		path, err := tlsca.WriteBundle(cache, bundle)
		if err != nil {
			return nil, errorf(ErrCodeInternal, "trust bundle: %v", err)
		}
		dst := sandboxBundlePath()
		if !fileOverlays {
			dst = path // read where it is (the profile allows the overlay's source)
		}
		p.overlay = append(p.overlay, ExtraMount{Src: path, Dst: dst})
		for _, k := range TrustEnv {
			p.env[k] = dst
		}
	}
	c := s.Policy.Credentials
	if c == nil {
		return p, nil
	}
	p.secrets = append([]credentials.Secret(nil), m.Secrets...)
	credentials.MintAll(p.secrets)
	set, drop := credentials.Env(c, p.secrets)
	for k, v := range set {
		p.env[k] = v
	}
	p.drop = drop
	files := map[string]credentials.Secret{}
	for _, sec := range p.secrets {
		if sec.File != "" {
			files[sec.File] = sec
		}
	}
	for _, f := range c.Files {
		path := policy.ExpandPath(f.Path, "/", home)
		sec, masked := files[path]
		if f.Mode != policy.CredentialMask || !masked || !fileOverlays {
			// Where a file cannot be shown in another's place, a masked
			// file is withheld (srt does the same on macOS).
			p.deny = append(p.deny, path)
			continue
		}
		// Where the file really is: a stand-in bound at a spelling that goes
		// through a link would leave the file itself readable.
		real := realPath(path)
		if fi, err := os.Lstat(real); err != nil || !fi.Mode().IsRegular() {
			p.deny = append(p.deny, path)
			continue
		}
		p.operator = append(p.operator, struct{ field, path string }{"credentials.files " + f.Path, real})
		if cache == "" {
			return nil, errorf(ErrCodeUnavailable, "a masked credential file needs a private cache directory for its stand-in (set XDG_RUNTIME_DIR or HOME)")
		}
		tmp, err := os.CreateTemp(cache, "standin-*")
		if err != nil {
			return nil, errorf(ErrCodeInternal, "stand-in file: %v", err)
		}
		_, werr := tmp.WriteString(sec.Standin + sec.Suffix)
		cerr := tmp.Close()
		p.cleanup = append(p.cleanup, tmp.Name())
		if werr != nil || cerr != nil || os.Chmod(tmp.Name(), 0o644) != nil {
			return nil, errorf(ErrCodeInternal, "stand-in file: %v %v", werr, cerr)
		}
		p.overlay = append(p.overlay, ExtraMount{Src: tmp.Name(), Dst: real})
	}
	return p, nil
}

// removeAll deletes the run's stand-in files.
func (p *egressPrep) removeAll() {
	if p == nil {
		return
	}
	for _, f := range p.cleanup {
		os.Remove(f)
	}
}

// NewEgressMaterial gathers what a run of p needs beyond its policy: the
// interception CA when p terminates TLS (the operator's files, else the
// one kept in caDir, made on first use), and the values of p's masked
// credentials (read through getenv and from files; home expands "~").
// It returns nil when p needs neither.
func NewEgressMaterial(p policy.Policy, caDir string, getenv func(string) (string, bool), home string) (*EgressMaterial, error) {
	var m EgressMaterial
	if t := p.Network.TLSTerminate; t != nil && len(p.Network.AllowedDomains) > 0 {
		var err error
		switch {
		case t.CACertPath != "":
			m.CACert, m.CAKey, err = tlsca.LoadCAFiles(policy.ExpandPath(t.CACertPath, "/", home), policy.ExpandPath(t.CAKeyPath, "/", home))
		case caDir == "":
			err = errorf(ErrCodeUnavailable, "no private directory to keep the TLS interception CA in; set network.tlsTerminate.caCertPath and caKeyPath")
		default:
			m.CACert, m.CAKey, err = tlsca.LoadOrCreateCA(caDir)
		}
		if err != nil {
			return nil, err
		}
		if t.CACertPath != "" {
			if _, err := tlsca.ParseCA(m.CACert, m.CAKey); err != nil {
				return nil, err
			}
		}
	}
	if len(p.Network.AllowedDomains) == 0 {
		return nilIfEmpty(&m), nil // no way out: the values have nowhere to go
	}
	secrets, err := credentials.Resolve(p.Credentials, p.Network.AllowedDomains, getenv, home)
	if err != nil {
		return nil, err
	}
	m.Secrets = secrets
	return nilIfEmpty(&m), nil
}

func nilIfEmpty(m *EgressMaterial) *EgressMaterial {
	if len(m.CACert) == 0 && len(m.Secrets) == 0 {
		return nil
	}
	return m
}
