// Package peak lets the bench's child programs report their memory: a parent
// cannot read a child's /proc after it exits, and the kernel's ru_maxrss for
// a child counts the parent's memory at fork.
package peak

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Print writes this process's peak RSS and the part of its RSS that is the
// mapped binary, as the lines "VmHWM: <n> kB" and "RssFile: <n> kB" of
// /proc/self/status.
func Print(w io.Writer) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "RssFile:") {
			if _, err := fmt.Fprint(w, line); err != nil {
				return err
			}
		}
	}
	return nil
}
