//go:build !linux

package dockerbox

func mountNosuid(string) string { return "" }

func unmountNosuid(string) {}

// privateBinDir leaves dir a directory here.
func privateBinDir(string) string { return "" }

func mountsUnder(string) bool { return false }

func selfBound(string) string { return "" }
