package redlockdriver_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// A Redlock attempt is an outage only when the nodes that failed left too
// few to make a quorum: a minority down with the lock held elsewhere is
// contention, whichever nodes answered first.
func TestQuorumErrorOutageOrContention(t *testing.T) {
	refused := syscall.ECONNREFUSED
	for _, tc := range []struct {
		name   string
		nodes  []error
		outage bool
	}{
		{"held, refused, not awaited", []error{backend.ErrNotAcquired, refused, redlockdriver.ErrNotAwaited}, false},
		{"refused, held, held", []error{refused, backend.ErrNotAcquired, backend.ErrNotAcquired}, false},
		{"granted, held, refused", []error{nil, backend.ErrNotAcquired, refused}, false},
		{"refused twice", []error{refused, refused, redlockdriver.ErrNotAwaited}, true},
		{"granted, refused twice", []error{nil, refused, refused}, true},
		{"five: held twice, one error, two not awaited", []error{backend.ErrNotAcquired, backend.ErrNotAcquired, refused, redlockdriver.ErrNotAwaited, redlockdriver.ErrNotAwaited}, false},
		{"five: three errors", []error{refused, refused, refused, backend.ErrNotAcquired, nil}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &redlockdriver.QuorumError{Quorum: len(tc.nodes)/2 + 1, Nodes: tc.nodes}
			assert.Equal(t, tc.outage, errors.Is(err, backend.ErrUnavailable))
			assert.Equal(t, !tc.outage, errors.Is(err, backend.ErrNotAcquired))
		})
	}
	assert.True(t, errors.Is(&redlockdriver.QuorumError{Quorum: 2, Nodes: []error{nil, nil, backend.ErrNotAcquired}, Late: true}, backend.ErrUnavailable),
		"a quorum that granted too late is an outage")
}
