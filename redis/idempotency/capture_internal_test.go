package idempotency

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAdded: a header field's values the handler added, never one outer
// middleware set, whether the handler appended to the field or replaced it.
func TestAdded(t *testing.T) {
	for _, tc := range []struct {
		now, before, want []string
		appended          bool
	}{
		{now: []string{"h"}, want: []string{"h"}},
		{now: []string{"o"}, before: []string{"o"}, appended: true},
		{now: []string{"o", "h"}, before: []string{"o"}, want: []string{"h"}, appended: true},
		{now: []string{"h"}, before: []string{"o"}, want: []string{"h"}},
		{now: []string{"h", "o", "o"}, before: []string{"o", "p"}, want: []string{"h", "o"}},
	} {
		got, appended := added(tc.now, tc.before)
		if len(tc.want) == 0 {
			assert.Empty(t, got, "%v after %v", tc.now, tc.before)
		} else {
			assert.Equal(t, tc.want, got, "%v after %v", tc.now, tc.before)
		}
		assert.Equal(t, tc.appended, appended, "%v after %v", tc.now, tc.before)
	}
}
