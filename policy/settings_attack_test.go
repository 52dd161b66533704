package policy

import "testing"

// "injectHosts": [] says the value may go nowhere (a generated settings
// file whose list came out empty, an operator parking a credential). It
// is parsed to nil, which Resolve and Offered read as "every allowed
// domain": the real value is then injected into requests to every host
// the sandbox may reach.
func TestSettingsEmptyInjectHostsIsNotEveryHost(t *testing.T) {
	p, err := ParseSettings([]byte(`{
		"network": {"allowedDomains": ["api.example.com", "uploads.example.org"], "tlsTerminate": {}},
		"credentials": {"envVars": [{"name": "GH_TOKEN", "mode": "mask", "injectHosts": []}]}}`))
	if err != nil {
		t.Logf("refused (a fix too): %v", err)
		return
	}
	e := p.Credentials.EnvVars[0]
	if e.InjectHosts == nil {
		t.Errorf("\"injectHosts\": [] became nil, which means every allowed domain (%v)", p.Network.AllowedDomains)
	}
}
