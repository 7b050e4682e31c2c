package glob

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The pattern matcher's cost is bounded by the lengths, whatever the
// pattern: one that backtracks exponentially in a naive matcher ends.
func TestMatchGlobIsLinear(t *testing.T) {
	done := make(chan bool, 1)
	go func() { done <- Match(strings.Repeat("*a", 40)+"*b", strings.Repeat("a", 200)) }()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case m := <-done:
		assert.False(t, m)
	case <-timer.C:
		t.Fatal("the matcher backtracks without bound")
	}
}
