package fenced_test

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
