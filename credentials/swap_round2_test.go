package credentials

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// The proxy scans every response with every spelling of every value
// (derivedPairs). swapReader.process looks for each pair from the current
// position to the end of the buffer after every match: a body made of
// the value (an echo of the sandbox's stand-ins, a stored paste read
// back) costs pairs x matches x 64 KiB, not the body's length. The proxy
// runs in the runner, outside the sandbox's cgroup: a sandbox that POSTs
// 1 MiB of stand-ins to an echoing API makes its proxy spend seconds of
// CPU on the answer.
func TestRound2SwapScanIsQuadratic(t *testing.T) {
	v := "ghp_realsecretvalue0123456789abcdefABCDEFGH"
	pairs := derivedPairs(v, Mint(v))
	body := bytes.Repeat([]byte(v), (1<<20)/len(v))
	other := bytes.Repeat([]byte("x"), len(body))
	scan := func(b []byte) time.Duration {
		start := time.Now()
		n, err := io.Copy(io.Discard, NewReader(bytes.NewReader(b), pairs, nil))
		if err != nil || n != int64(len(b)) {
			t.Fatalf("%d %v", n, err)
		}
		return time.Since(start)
	}
	plain, values := scan(other), scan(body)
	t.Logf("1 MiB: %v without the value, %v made of it (%d pairs)", plain, values, len(pairs))
	if values > time.Second {
		t.Fatalf("scanning 1 MiB made of the value took %v (%v for 1 MiB without it): a sandbox makes its proxy burn CPU outside its cgroup", values, plain)
	}
}
