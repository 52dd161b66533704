package profiles

import "testing"

func TestEveryProfileParses(t *testing.T) {
	if len(Names()) == 0 {
		t.Fatal("no embedded profiles")
	}
	for _, n := range Names() {
		if _, err := Get(n); err != nil {
			t.Errorf("profile %s: %v", n, err)
		}
	}
	if _, err := Get("nope"); err == nil {
		t.Error("unknown profile accepted")
	}
}
