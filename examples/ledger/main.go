// Command ledger will demonstrate fencing tokens protecting a PostgreSQL
// ledger from a lock holder that paused past its lease (issue 9).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "examples/ledger is not implemented yet (issue 9)")
	os.Exit(1)
}
