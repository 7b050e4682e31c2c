//go:build !unix

package main

import "os"

// terminalRows is 0: the height is not read on this system.
func terminalRows(*os.File) int { return 0 }
