// Package errs is srt-mcp's one error vocabulary, from the bottom of the
// server (the runner, the policy, the session registry) to every door. An
// Error carries a stable code a client can act on, a message saying what
// to change, and the argument or setting it concerns; its HTTP status
// follows from the code. Each door maps an Error to its wire format in one
// place (a JSON-RPC tool error, seed 000's {"error", "message"}, a
// LibreChat or playground HTTP reply) instead of reconciling five error
// types with switches.
//
// The package has no dependencies: the runner and the in-sandbox stage
// link it too.
package errs

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
)

// Error is a failure reported to a caller.
type Error struct {
	// Code is stable and machine-readable: invalid_arguments,
	// session_not_found, quota_exceeded, ... (the constants below).
	Code string
	// Message says what is wrong and what to do about it; it never names
	// a host path.
	Message string
	// Field is the argument or setting the error concerns, dotted with
	// indexes ("filesystem.allow_write[1]"); "" for none.
	Field string
	// Value is the offending value, when showing it helps.
	Value string
}

// Error leads with what the reader changes: an error about an argument or
// setting reads `field "value": message` (the entry first, as srt's
// settings errors do); any other reads "code: message".
func (e *Error) Error() string {
	if e.Field != "" || e.Code == "" {
		return e.Detail()
	}
	return e.Code + ": " + e.Message
}

// Detail is the message, after the field and value when there are any:
// `working_directory "/etc": is outside the paths the operator allows`.
func (e *Error) Detail() string {
	if e.Field == "" {
		return e.Message
	}
	var b strings.Builder
	b.WriteString(e.Field)
	if e.Value != "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Status is the HTTP status that fits the error's code.
func (e *Error) Status() int { return StatusOf(e.Code) }

// Is matches another *Error with the same code, so that errors.Is(err,
// errs.New(errs.SessionBusy, "")) asks "is this a busy session?".
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// New makes an Error with a formatted message.
func New(code, format string, args ...any) *Error {
	if len(args) == 0 {
		return &Error{Code: code, Message: format}
	}
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// OnField makes an Error about one argument or setting.
func OnField(code, field, value, message string) *Error {
	return &Error{Code: code, Field: field, Value: value, Message: message}
}

// Codes every layer shares. A door may add its own wire codes; these are
// the ones the service and below return.
const (
	InvalidArguments   = "invalid_arguments"
	InvalidPath        = "invalid_path"
	InvalidDomain      = "invalid_domain"
	InvalidLimit       = "invalid_limit"
	InvalidSettings    = "invalid_settings"
	InvalidSessionID   = "invalid_session_id"
	ExceedsCeiling     = "exceeds_ceiling"
	NetworkNotAllowed  = "network_not_allowed"
	NotFound           = "not_found"
	SessionNotFound    = "session_not_found"
	Expired            = "expired"
	FileExists         = "file_exists"
	SessionBusy        = "session_busy"
	ExecutionFinished  = "execution_finished"
	MaxSessions        = "max_sessions"
	TooManyExecutions  = "too_many_executions"
	TooManySessions    = "too_many_mcp_sessions"
	ServerDraining     = "server_draining"
	QuotaExceeded      = "quota_exceeded"
	TooLarge           = "too_large"
	CodeTooLarge       = "code_too_large"
	ArtifactTooLarge   = "artifact_too_large"
	StorageFull        = "storage_full"
	Unauthorized       = "unauthorized"
	Forbidden          = "forbidden"
	RateLimited        = "rate_limited"
	UnsupportedLang    = "unsupported_language"
	RuntimeUnavailable = "runtime_unavailable"
	KernelUnavailable  = "kernel_unavailable"
	KernelBusy         = "kernel_busy"
	Internal           = "internal_error"
)

// StatusOf maps a code to its HTTP status: a caller's mistake is 4xx (404
// for a handle that is not the caller's or does not exist, 409 for a busy
// session or an existing file, 413 for anything too big, 429 for a
// caller's own bound), the server's state 5xx (503 for a server-wide cap
// or a drain, 500 for a failure of its own).
func StatusOf(code string) int {
	switch code {
	case NotFound, SessionNotFound, Expired:
		return http.StatusNotFound
	case SessionBusy, FileExists, ExecutionFinished, KernelBusy:
		return http.StatusConflict
	case QuotaExceeded, TooLarge, CodeTooLarge, ArtifactTooLarge:
		return http.StatusRequestEntityTooLarge
	case Unauthorized:
		return http.StatusUnauthorized
	case Forbidden, ExceedsCeiling, NetworkNotAllowed:
		return http.StatusForbidden
	case RateLimited, TooManySessions:
		return http.StatusTooManyRequests
	case MaxSessions, TooManyExecutions, ServerDraining, RuntimeUnavailable, KernelUnavailable:
		return http.StatusServiceUnavailable
	case StorageFull, Internal:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// Of is err as an Error: the *Error in its chain, storage_full for a full
// disk, internal_error for anything else (its text as the message).
func Of(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return New(StorageFull, "the server's storage is full; free space (close sessions) and retry")
	}
	return &Error{Code: Internal, Message: err.Error()}
}

// CodeOf is the code of err (internal_error for an error without one).
func CodeOf(err error) string { return Of(err).Code }

// Has reports whether err is, or wraps, an Error with code.
func Has(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
