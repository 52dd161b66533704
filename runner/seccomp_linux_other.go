//go:build linux && !amd64 && !arm64

package runner

// legacyModeSyscalls: no filter is built for this architecture anyway
// (auditArch refuses it, and the run fails closed).
var legacyModeSyscalls []modeSyscall
