package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/srt-mcp/srt-mcp/credentials"
	"github.com/srt-mcp/srt-mcp/policy"
)

// checkPlan (round 1) refuses a run that may write an operator file the
// proxy trusts: a masked credential file, an extraCaCertPaths file. It
// compares the path as the settings spell it with the plan's writable
// roots, which are canonical (symlinks resolved). A path that reaches the
// file through a symlinked directory (a dotfile manager's ~/.config ->
// ~/dotfiles/config, /etc/ssl/corp -> /srv/certs) is not seen to lie in
// the writable root it is in: the run may move the masked file away or
// replace the CA, as round 1's tests did with the plain path.
func TestRound2CheckPlanMissesSymlinkedOperatorPath(t *testing.T) {
	if !fileOverlays {
		t.Skip("masked files are withheld where files cannot be overlaid")
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(tmp, "proj")
	for _, d := range []string{filepath.Join(proj, "cfg"), filepath.Join(proj, "certs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proj, "cfg", "token"), []byte("real-token-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "certs", "corp.pem"), []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The operator's paths go through links into the project.
	if err := os.Symlink(filepath.Join(proj, "cfg"), filepath.Join(tmp, "config")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(proj, "certs"), filepath.Join(tmp, "certs")); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(tmp, "config", "token")
	ca := filepath.Join(tmp, "certs", "corp.pem")
	for _, c := range []struct {
		name string
		pol  policy.Policy
		mat  *EgressMaterial
	}{
		{"credentials.files", policy.Policy{
			Network:     policy.Network{AllowedDomains: []string{"api.example.com"}},
			Credentials: &policy.Credentials{Files: []policy.CredentialFile{{Path: token, Mode: policy.CredentialMask, InjectHosts: []string{"api.example.com"}}}},
		}, &EgressMaterial{Secrets: []credentials.Secret{{Name: token, File: token, Value: "real-token-0123456789abcdef", Suffix: "\n", InjectHosts: []string{"api.example.com"}}}}},
		{"extraCaCertPaths", policy.Policy{
			Network: policy.Network{AllowedDomains: []string{"api.example.com"}, TLSTerminate: &policy.TLSTerminate{ExtraCACertPaths: []string{ca}}},
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Spec{Policy: c.pol, Egress: c.mat, Cwd: proj, Home: "/root"}
			eg, err := prepareEgress(s, t.TempDir(), "/root", false)
			if err != nil {
				t.Fatal(err)
			}
			defer eg.removeAll()
			plan, err := BuildPlan(PlanInput{FS: policy.Filesystem{AllowWrite: []string{proj}}, Cwd: proj, Home: "/root"})
			if err != nil {
				t.Fatal(err)
			}
			if err := eg.checkPlan(plan); err == nil {
				t.Fatalf("%s names a file inside the writable root %s through a symlink; the run was not refused", c.name, proj)
			}
		})
	}
}
