package mcpserver

import (
	"encoding/json"
	"testing"
)

func TestStrictArguments(t *testing.T) {
	n := namesOf(json.RawMessage(`{"type": "object", "properties": {
  "execution_id": {"type": "string"},
  "input_data": {"type": "string"},
  "close_stdin": {"type": "boolean"}}, "required": ["execution_id"]}`))
	if n == nil {
		t.Fatal("schema not read")
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"execution_id": "x", "input_data": "a\n"}, ""},
		{map[string]any{"execution_id": "x", "input": "a\n"}, `unknown argument "input"; send_stdin takes execution_id, input_data, close_stdin — did you mean input_data?`},
		{map[string]any{"execution_id": "x", "closestdin": true}, `unknown argument "closestdin"; send_stdin takes execution_id, input_data, close_stdin — did you mean close_stdin?`},
		{map[string]any{"execution_id": "x", "zzz": 1, "yyy": 2}, `unknown arguments "yyy", "zzz"; send_stdin takes execution_id, input_data, close_stdin`},
		{map[string]any{"input_data": "a"}, `missing required argument "execution_id"; send_stdin takes execution_id, input_data, close_stdin`},
		{map[string]any{"executionId": "x"}, `unknown argument "executionId"; send_stdin takes execution_id, input_data, close_stdin — did you mean execution_id?`},
	} {
		if got := n.check("send_stdin", tc.args); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
	none := namesOf(json.RawMessage(`{"type": "object", "properties": {}}`))
	if got := none.check("list_executions", map[string]any{"all": true}); got != `unknown argument "all"; list_executions takes no arguments` {
		t.Errorf("no arguments: %s", got)
	}
}

func TestStrictSandboxConfig(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   string
	}{
		{`{"network": {"allowed_domains": ["pypi.org"], "request_rules": [{"host": "a", "methods": ["GET"]}]}, "credentials": []}`, ""},
		{`{"network": {"allowedDomains": ["pypi.org"]}}`, `unknown key "allowedDomains" in sandbox_config.network; it takes allowed_domains, denied_domains, request_rules, require_host_match — did you mean allowed_domains?`},
		{`{"network": {"request_rules": [{"host": "a"}, {"host": "b", "path": ["/"]}]}}`, `unknown key "path" in sandbox_config.network.request_rules[1]; it takes host, methods, paths — did you mean paths?`},
		{`{"filesystem": {"allow_git_config": true}}`, `unknown key "allow_git_config" in sandbox_config.filesystem; it takes allow_read, allow_write, deny_read, deny_write`},
		{`{"net": {}}`, `unknown key "net" in sandbox_config; it takes credentials, filesystem, network — did you mean network?`},
		{`"pypi.org"`, `sandbox_config must be an object`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.config), &v); err != nil {
			t.Fatal(err)
		}
		if got := sandboxConfigKeys.check("sandbox_config", v); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.config, got, tc.want)
		}
	}
}
