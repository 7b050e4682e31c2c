//go:build !unix

package cli

import "os"

// terminalRows is 0: the height is not read on this system.
func terminalRows(*os.File) int { return 0 }
