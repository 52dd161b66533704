package runner

// seatbeltRefusal is macOS's fail-closed rule, kept apart from the
// platform file so it is tested everywhere: a limit or policy the seatbelt
// runner cannot enforce is an error, never silently dropped.
//
//   - memory: macOS has no working RLIMIT_AS (setrlimit accepts it and
//     nothing enforces it) and no cgroups;
//   - network allow-lists: the filtering proxy needs listeners the sandbox
//     opens in a network namespace of its own, which macOS does not have;
//     a seatbelt sandbox gets no network at all.
func seatbeltRefusal(cfg *initConfig, egress bool) *Error {
	if cfg.Limits.AS > 0 {
		return errorf(ErrCodeLimitUnenforced, "macOS cannot bound a sandbox's memory (max_memory %d bytes): it has no working RLIMIT_AS and no cgroups; set max_memory to 0 to run without a memory limit here, or use Linux", cfg.Limits.AS)
	}
	if egress || cfg.Proxy {
		return errorf(ErrCodeLimitUnenforced, "network allow-lists are enforced on Linux only (the filtering proxy needs a network namespace); on macOS a sandbox has no network: remove allowed_domains to run here")
	}
	return nil
}
