package errs

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"
)

func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		e         *Error
		err, text string
	}{
		{New(SessionBusy, "a run is going"), "session_busy: a run is going", "a run is going"},
		{OnField(InvalidPath, "filesystem.allow_write[1]", "/x", "does not exist"), `filesystem.allow_write[1] "/x": does not exist`, `filesystem.allow_write[1] "/x": does not exist`},
		{&Error{Message: "the settings file is empty"}, "the settings file is empty", "the settings file is empty"},
		{New(TooLarge, "%d bytes", 7), "too_large: 7 bytes", "7 bytes"},
	} {
		if got := tc.e.Error(); got != tc.err {
			t.Errorf("Error() = %q, want %q", got, tc.err)
		}
		if got := tc.e.Detail(); got != tc.text {
			t.Errorf("Detail() = %q, want %q", got, tc.text)
		}
	}
}

func TestStatusOf(t *testing.T) {
	for code, want := range map[string]int{
		SessionNotFound: http.StatusNotFound, NotFound: http.StatusNotFound, SessionBusy: http.StatusConflict,
		QuotaExceeded: http.StatusRequestEntityTooLarge, TooManySessions: http.StatusTooManyRequests,
		MaxSessions: http.StatusServiceUnavailable, ServerDraining: http.StatusServiceUnavailable,
		StorageFull: http.StatusInternalServerError, Internal: http.StatusInternalServerError,
		InvalidArguments: http.StatusBadRequest, "a_door_code": http.StatusBadRequest,
	} {
		if got := StatusOf(code); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, want)
		}
	}
}

func TestOf(t *testing.T) {
	busy := New(SessionBusy, "busy")
	wrapped := fmt.Errorf("starting: %w", busy)
	if Of(wrapped) != busy || CodeOf(wrapped) != SessionBusy || !Has(wrapped, SessionBusy) || Has(wrapped, NotFound) {
		t.Fatalf("a wrapped Error: %v", Of(wrapped))
	}
	if !errors.Is(wrapped, New(SessionBusy, "")) || errors.Is(wrapped, New(NotFound, "")) {
		t.Fatal("errors.Is by code")
	}
	full := &os.PathError{Op: "write", Path: "/state/x", Err: syscall.ENOSPC}
	if e := Of(full); e.Code != StorageFull || e.Status() != 500 {
		t.Fatalf("a full disk: %v", e)
	}
	if e := Of(errors.New("boom")); e.Code != Internal || e.Message != "boom" {
		t.Fatalf("an error without a code: %v", e)
	}
	if Of(nil) != nil {
		t.Fatal("Of(nil)")
	}
}
