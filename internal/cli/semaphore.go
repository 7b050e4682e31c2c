package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
)

// writeSemaphore prints the permits of the semaphore of key, when the
// store keeps semaphores and key's has a limit or holders: inspect's text
// after the lock's. A store without semaphores prints nothing.
func writeSemaphore(ctx context.Context, w io.Writer, l *mutex.Locker, key string) error {
	s, err := l.Semaphore(key, 1) // a handle: the limit is the store's
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	limit, holders, err := s.Holders(ctx)
	if err != nil {
		return err
	}
	if limit == 0 && len(holders) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nsemaphore: limit %d, %d permits held, by lease end\n", limit, len(holders))
	if len(holders) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  OWNER\tLEASE LEFT\tTOKEN\tOWNER ID")
	for _, h := range holders {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", lockview.Visible(ownerText(h.Owner, h.OwnerInfo)), human(h.Lease), h.Token, lockview.Visible(h.Owner))
	}
	return tw.Flush()
}
