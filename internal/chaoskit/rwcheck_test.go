package chaoskit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The read-write workload's checks on made-up histories: each must fail
// on the fault it names, and pass what the lock allows.

func TestStaleReads(t *testing.T) {
	at := time.Unix(0, 0)
	writes := []rwWrite{
		{Token: 10, After: 1, Live: true},
		{Token: 20, After: 2, Live: true},
		{Token: 30, After: 3, Live: false}, // committed after its lease: the fence's business
	}
	fresh := rwRead{Token: 20, Seen: 2, At: at, Live: true}
	stale := rwRead{Token: 20, Seen: 1, At: at, Live: true}
	lost := rwRead{Token: 20, Seen: 1, At: at, Live: false}
	beforeAny := rwRead{Token: 5, Seen: 0, At: at, Live: true}
	unvouched := rwRead{Token: 30, Seen: 2, At: at, Live: true}
	got := staleReads(writes, []rwRead{fresh, stale, lost, beforeAny, unvouched})
	assert.Equal(t, []staleRead{{Read: stale, Missed: writes[1]}}, got)
}

func TestRWOverlaps(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	margin := 10 * time.Millisecond
	released := rwSpan{Who: 0, Token: 1, Stopped: true, Start: at(0), End: at(20)}
	expired := rwSpan{Who: 1, Token: 1, Start: at(0), End: at(20)}
	reader := rwSpan{Who: 2, Token: 1, Stopped: true, Start: at(15), End: at(40)}
	writer := func(start int) rwSpan {
		return rwSpan{Who: 3, Write: true, Stopped: true, Token: 2, Start: at(start), End: at(start + 30)}
	}
	assert.Empty(t, rwOverlaps([]rwSpan{released, expired, reader}, margin), "readers share")
	assert.Empty(t, rwOverlaps([]rwSpan{released, writer(20)}, margin), "a writer right after a release")
	assert.Equal(t, []rwOverlap{{A: released, B: writer(19), By: time.Millisecond}},
		rwOverlaps([]rwSpan{released, writer(19)}, margin), "a writer before the release")
	assert.Empty(t, rwOverlaps([]rwSpan{expired, writer(15)}, margin), "within the drift margin of an expiry")
	assert.Equal(t, []rwOverlap{{A: expired, B: writer(5), By: 15 * time.Millisecond}},
		rwOverlaps([]rwSpan{writer(5), expired}, margin), "beyond it")
	w2 := writer(25)
	w2.Who = 0
	assert.Len(t, rwOverlaps([]rwSpan{writer(0), w2}, margin), 1, "two writers")
}

func TestExplained(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	lossy := []window{{at(100), at(150)}}
	ok, _ := explained(lossy, at(140), at(300))
	assert.True(t, ok, "a restart between the first grant and the second")
	ok, near := explained(lossy, at(160), at(300))
	assert.False(t, ok, "a restart before the first grant")
	assert.Equal(t, lossy, near)
}
