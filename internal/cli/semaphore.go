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

// semaphoreOf is the semaphore of key as inspect shows it: nil when the
// store keeps no semaphores or key's has neither a limit nor holders, so
// that neither view claims "none" of a store it could not look at.
func semaphoreOf(ctx context.Context, l *mutex.Locker, key string) (*lockview.Semaphore, error) {
	s, err := mutex.NewSemaphore(l, key, 1) // a handle: the limit is the store's
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	limit, holders, err := s.Holders(ctx)
	if err != nil {
		return nil, err
	}
	return lockview.SemaphoreOf(limit, holders), nil
}

// writeSemaphore prints the permits of the semaphore of key, when the
// store keeps semaphores and key's has a limit or holders: inspect's text
// after the lock's. A store without semaphores prints nothing.
func writeSemaphore(ctx context.Context, w io.Writer, l *mutex.Locker, key string) error {
	sem, err := semaphoreOf(ctx, l, key)
	if err != nil || sem == nil {
		return err
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
