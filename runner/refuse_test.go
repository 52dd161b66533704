package runner

import (
	"strings"
	"testing"
)

// The macOS runner refuses what it cannot enforce (class 10 of the hostile
// suite: it used to drop the memory limit and the allow-list silently).
func TestSeatbeltRefusesWhatItCannotEnforce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    initConfig
		egress bool
		want   string
	}{
		{"memory", initConfig{Limits: rlimits{AS: 2 << 30}}, false, "memory"},
		{"network", initConfig{}, true, "network"},
		{"proxy", initConfig{Proxy: true}, false, "network"},
		{"none", initConfig{Limits: rlimits{NoFile: 1024, FSize: 1 << 20}}, false, ""},
	} {
		e := seatbeltRefusal(&tc.cfg, tc.egress)
		switch {
		case tc.want == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.want != "" && (e == nil || e.Code != ErrCodeLimitUnenforced || !strings.Contains(e.Message, tc.want)):
			t.Errorf("%s: want %s naming %s, got %v", tc.name, ErrCodeLimitUnenforced, tc.want, e)
		}
	}
}
