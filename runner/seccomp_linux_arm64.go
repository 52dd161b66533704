package runner

// legacyModeSyscalls: arm64 has only the *at forms.
var legacyModeSyscalls []modeSyscall
