package cause_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/cause"
)

func TestWrap(t *testing.T) {
	lost := errors.New("mutex: lock lost")
	server := errors.New("dial tcp: connection refused")
	cancelled := func(c error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(c)
		return ctx
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		is    []error
		msg   string
		equal bool // err comes back unchanged
	}{
		{"nil error", cancelled(lost), nil, nil, "", true},
		{"live context", context.Background(), server, []error{server}, server.Error(), true},
		{"plain cancel", cancelled(nil), context.Canceled, []error{context.Canceled}, "context canceled", true},
		{"cause added", cancelled(lost), context.Canceled, []error{context.Canceled, lost},
			"context canceled (cause: mutex: lock lost)", false},
		{"server's error kept", cancelled(lost), server, []error{server, lost},
			"dial tcp: connection refused (cause: mutex: lock lost)", false},
		{"cause already there", cancelled(lost), lost, []error{lost}, lost.Error(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cause.Wrap(tc.ctx, tc.err)
			if tc.equal {
				assert.Equal(t, tc.err, got)
			}
			for _, want := range tc.is {
				assert.ErrorIs(t, got, want)
			}
			if got != nil {
				assert.Equal(t, tc.msg, got.Error())
			}
		})
	}
}
