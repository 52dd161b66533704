package runner

// seatbeltRefusal is macOS's fail-closed rule, kept apart from the
// platform file so it is tested everywhere: a limit the seatbelt runner
// cannot enforce is an error, never silently dropped. macOS has no working
// RLIMIT_AS (setrlimit accepts it and nothing enforces it) and no cgroups,
// so a memory limit is refused. A network allow-list is not: the runner
// serves the proxy on loopback ports and the profile lets the command reach
// only those (run_darwin.go, SeatbeltProfile).
func seatbeltRefusal(cfg *initConfig) *Error {
	if cfg.Limits.AS > 0 {
		return errorf(ErrCodeLimitUnenforced, "macOS cannot bound a sandbox's memory (max_memory %d bytes): it has no working RLIMIT_AS and no cgroups; set max_memory to 0 to run without a memory limit here, or use Linux", cfg.Limits.AS)
	}
	return nil
}
