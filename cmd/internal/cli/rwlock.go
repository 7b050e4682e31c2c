package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex/admin"
)

// rwLockOf is the read-write lock of key as inspect shows it: nil when the
// store keeps none or key's has nothing to show, as semaphoreOf.
func rwLockOf(ctx context.Context, a *admin.Admin, key string) (*lockview.RWLock, error) {
	rw, err := a.InspectRWLock(ctx, key)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lockview.RWLockOf(rw), nil
}

// writeRWMutex prints the holds of rw, the read-write lock of an inspected
// key (nil: none, or a store without read-write locks, which prints
// nothing): inspect's text after the semaphore's.
func writeRWMutex(w io.Writer, rw *lockview.RWLock) error {
	if rw == nil {
		return nil
	}
	fmt.Fprintf(w, "\nread-write lock: %s, %d writers waiting, last write's token %d\n", rwWords(rw), rw.Waiting, rw.LastWrite)
	holds, kind := rw.Readers, "read"
	if rw.Writer != nil {
		holds, kind = []lockview.Permit{*rw.Writer}, "write"
	}
	if len(holds) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOLD\tOWNER\tLEASE LEFT\tTOKEN\tOWNER ID")
	for _, h := range holds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", kind, lockview.Visible(h.Who()), human(time.Duration(h.LeaseMs)), h.Token, lockview.Visible(h.Owner))
	}
	return tw.Flush()
}

// rwWords says who holds rw: "held for writing" or "N readers".
func rwWords(rw *lockview.RWLock) string {
	if rw.Writer != nil {
		return "held for writing"
	}
	return fmt.Sprintf("%d readers", len(rw.Readers))
}
