//go:build !linux

package dockerbox

func mountNosuid(string) string { return "" }

func unmountNosuid(string) {}
