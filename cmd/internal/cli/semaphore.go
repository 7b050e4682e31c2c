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

// semaphoreOf is the semaphore of key as inspect shows it: nil when the
// store keeps no semaphores or key's has neither a limit nor holders, so
// that neither view claims "none" of a store it could not look at.
func semaphoreOf(ctx context.Context, a *admin.Admin, key string) (*lockview.Semaphore, error) {
	s, err := a.InspectSemaphore(ctx, key)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lockview.SemaphoreOf(s), nil
}

// writeSemaphore prints the permits of sem, the semaphore of an inspected
// key (nil: none, or a store without semaphores, which prints nothing):
// inspect's text after the lock's.
func writeSemaphore(w io.Writer, sem *lockview.Semaphore) error {
	if sem == nil {
		return nil
	}
	fmt.Fprintf(w, "\nsemaphore: limit %d, %d permits held, by lease end\n", sem.Limit, len(sem.Holders))
	if len(sem.Holders) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  OWNER\tLEASE LEFT\tTOKEN\tOWNER ID")
	for _, h := range sem.Holders {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", lockview.Visible(h.Who()), human(time.Duration(h.LeaseMs)), h.Token, lockview.Visible(h.Owner))
	}
	return tw.Flush()
}
