// Command stampede will demonstrate cluster-wide stampede protection with
// httplock (issue 9).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "examples/stampede is not implemented yet (issue 9)")
	os.Exit(1)
}
