package runner

import (
	"bytes"
	"os"
	"strconv"
)

// cpuTimes reads the machine's idle (idle, iowait and nice) and total CPU
// time from /proc/stat, in clock ticks.
func cpuTimes() (idle, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		// idle, iowait, and nice: what niced processes take (a root
		// runner's sandboxes started ahead, at nice 19) yields to running
		// work, and counting it would make those starts turn themselves off.
		if i == 1 || i == 3 || i == 4 {
			idle += n
		}
	}
	return idle, total, true
}
