package librechat

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/srt-mcp/srt-mcp/guard"
)

// The Code API limits rates by itself (its route is exempt from the
// guard's per-caller limit), so its limiters must be bounded as the
// guard's are (guard.maxLimiters, 10000): with NoAuth, every client
// address is a principal of its own, and a client with many addresses
// (an IPv6 prefix) must not make the map grow without end.
func TestRateLimitersBounded(t *testing.T) {
	const maxKept = 10000
	lc := &librechat{cfg: Config{NoAuth: true, RateScale: 1}, rl: guard.NewLimiters(maxLimiters)}
	h := lc.auth("list", func(http.ResponseWriter, *http.Request) {})
	for i := 0; i < maxKept+1000; i++ {
		r := httptest.NewRequest("GET", "/files/sess_0123456789ab", nil)
		r.RemoteAddr = fmt.Sprintf("[2001:db8::%x:%x]:4000", i>>16, i&0xffff)
		w := httptest.NewRecorder()
		h(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body.String())
		}
	}
	if n := lc.rl.Len(); n > maxKept {
		t.Errorf("%d rate limiters kept after %d anonymous callers from distinct addresses; want at most %d (as the guard's)", n, maxKept+1000, maxKept)
	}
}
