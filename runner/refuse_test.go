package runner

import (
	"strings"
	"testing"
)

// The macOS runner refuses what it cannot enforce (class 10 of the hostile
// suite: it used to drop the memory limit silently). A network allow-list
// it now enforces, so that alone is no reason to refuse.
func TestSeatbeltRefusesWhatItCannotEnforce(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  initConfig
		want string
	}{
		{"memory", initConfig{runConfig: runConfig{Limits: rlimits{AS: 2 << 30}}}, "memory"},
		{"memory and network", initConfig{runConfig: runConfig{Limits: rlimits{AS: 2 << 30}}, Proxy: true}, "memory"},
		{"network", initConfig{Proxy: true}, ""},
		{"none", initConfig{runConfig: runConfig{Limits: rlimits{NoFile: 1024, FSize: 1 << 20}}}, ""},
	} {
		e := seatbeltRefusal(&tc.cfg)
		switch {
		case tc.want == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.want != "" && (e == nil || e.Code != ErrCodeLimitUnenforced || !strings.Contains(e.Message, tc.want)):
			t.Errorf("%s: want %s naming %s, got %v", tc.name, ErrCodeLimitUnenforced, tc.want, e)
		}
	}
}
