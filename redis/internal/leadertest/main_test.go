package leadertest

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
