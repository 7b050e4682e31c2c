//go:build unix

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalRows is the height of the terminal f is, 0 when it is none.
func terminalRows(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Row)
}
