// Package procstat reads a process's CPU time from Linux's /proc.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// Linux whatever the kernel's tick).
const userHZ = 100

// CPU returns the user+system CPU time process pid has used, from
// /proc/<pid>/stat (utime and stime, fields 14 and 15), in steps of 10 ms.
// It fails where /proc is missing or pid is not a running process.
func CPU(pid int) (time.Duration, error) { return cpu(strconv.Itoa(pid)) }

// Self is CPU of this process.
func Self() (time.Duration, error) { return cpu("self") }

func cpu(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, fmt.Errorf("procstat: %w", err)
	}
	return parse(pid, string(b))
}

// parse returns utime+stime of the content s of /proc/<pid>/stat.
func parse(pid, s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("procstat: /proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:]) // from field 3 (state) on
	if len(f) < 13 {
		return 0, fmt.Errorf("procstat: /proc/%s/stat: %d fields", pid, len(f)+2)
	}
	var ticks uint64
	for _, v := range f[11:13] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: /proc/%s/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// Sum returns the CPU time of the processes pids summed; it fails naming
// the first one whose time cannot be read.
func Sum(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := CPU(pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}
