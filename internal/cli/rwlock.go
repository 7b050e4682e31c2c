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

// writeRWMutex prints the holds of the read-write lock of key, when the
// store keeps read-write locks and key's has a writer, readers, waiting
// writers or a write's token: inspect's text after the semaphore's. A store
// without read-write locks prints nothing.
func writeRWMutex(ctx context.Context, w io.Writer, l *mutex.Locker, key string) error {
	rw, err := l.RWMutex(key)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := rw.State(ctx)
	if err != nil {
		return err
	}
	if st.Writer == nil && len(st.Readers) == 0 && st.Waiting == 0 && st.LastWrite == 0 {
		return nil
	}
	holds := st.Readers
	state := fmt.Sprintf("%d readers", len(st.Readers))
	if st.Writer != nil {
		holds, state = []mutex.PermitHolder{*st.Writer}, "held for writing"
	}
	fmt.Fprintf(w, "\nread-write lock: %s, %d writers waiting, last write's token %d\n", state, st.Waiting, st.LastWrite)
	if len(holds) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOLD\tOWNER\tLEASE LEFT\tTOKEN\tOWNER ID")
	for _, h := range holds {
		kind := "read"
		if st.Writer != nil {
			kind = "write"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", kind, lockview.Visible(ownerText(h.Owner, h.OwnerInfo)), human(h.Lease), h.Token, lockview.Visible(h.Owner))
	}
	return tw.Flush()
}
