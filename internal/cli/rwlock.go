package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
)

// rwLockOf is the read-write lock of key as inspect shows it: nil when the
// store keeps none or key's has nothing to show, as semaphoreOf.
func rwLockOf(ctx context.Context, l *mutex.Locker, key string) (*lockview.RWLock, error) {
	rw, err := mutex.NewRWMutex(l, key)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := rw.State(ctx)
	if err != nil {
		return nil, err
	}
	return lockview.RWLockOf(st), nil
}

// writeRWMutex prints the holds of the read-write lock of key, when the
// store keeps read-write locks and key's has a writer, readers, waiting
// writers or a write's token: inspect's text after the semaphore's. A store
// without read-write locks prints nothing.
func writeRWMutex(ctx context.Context, w io.Writer, l *mutex.Locker, key string) error {
	rw, err := rwLockOf(ctx, l, key)
	if err != nil || rw == nil {
		return err
	}
	holds, kind, state := rw.Readers, "read", fmt.Sprintf("%d readers", len(rw.Readers))
	if rw.Writer != nil {
		holds, kind, state = []lockview.Permit{*rw.Writer}, "write", "held for writing"
	}
	fmt.Fprintf(w, "\nread-write lock: %s, %d writers waiting, last write's token %d\n", state, rw.Waiting, rw.LastWrite)
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
