package admintest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// Inspection, listing and forced release refuse bad input before any round
// trip, with an error matching mutex.ErrInvalid and no panic; a backend
// without inspection says plainly that it has none.
func TestBadInput(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	a := viewerOf(t, c)
	var nilAdmin *admin.Admin
	var nilCtx context.Context
	before, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	for name, call := range map[string]func() error{
		"New nil Locker":       func() error { _, err := admin.New(nil); return err },
		"Inspect empty key":    func() error { _, err := a.Inspect(ctx, ""); return err },
		"Inspect key too long": func() error { _, err := a.Inspect(ctx, strings.Repeat("k", mutex.MaxKeyLen+1)); return err },
		"Inspect nil ctx":      func() error { _, err := a.Inspect(nilCtx, "k"); return err },
		"Inspect nil Admin":    func() error { _, err := nilAdmin.Inspect(ctx, "k"); return err },
		"List nil Admin":       func() error { _, err := nilAdmin.List(ctx, admin.ListOptions{}); return err },
		"ListAll nil Admin":    func() error { _, err := nilAdmin.ListAll(ctx, admin.ListOptions{}); return err },
		"List nil ctx":         func() error { _, err := a.List(nilCtx, admin.ListOptions{}); return err },
		"List negative Scans":  func() error { _, err := a.List(ctx, admin.ListOptions{Scans: -1}); return err },
		"List too many Scans":  func() error { _, err := a.List(ctx, admin.ListOptions{Scans: 1001}); return err },
		"List huge Count":      func() error { _, err := a.List(ctx, admin.ListOptions{Count: 1 << 20}); return err },
		"List negative Limit":  func() error { _, err := a.List(ctx, admin.ListOptions{Limit: -1}); return err },
		"List Match too long": func() error {
			_, err := a.List(ctx, admin.ListOptions{Match: strings.Repeat("*", mutex.MaxKeyLen+1)})
			return err
		},
		"List cursor too long":   func() error { _, err := a.List(ctx, admin.ListOptions{Cursor: strings.Repeat("9", 600)}); return err },
		"List foreign cursor":    func() error { _, err := a.List(ctx, admin.ListOptions{Cursor: "x"}); return err },
		"List cursor past end":   func() error { _, err := a.List(ctx, admin.ListOptions{Cursor: "9:0:" + c.Options().Addr}); return err },
		"List cursor at end":     func() error { _, err := a.List(ctx, admin.ListOptions{Cursor: "1:0:" + c.Options().Addr}); return err },
		"ListAll foreign cursor": func() error { _, err := a.ListAll(ctx, admin.ListOptions{Cursor: "x"}); return err },
		"List cursor of another server": func() error {
			_, err := a.List(ctx, admin.ListOptions{Cursor: "0:17:127.0.0.1:1"})
			return err
		},
		"Force nil Admin":      func() error { _, err := nilAdmin.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "r"}); return err },
		"Force nil ctx":        func() error { _, err := a.ForceRelease(nilCtx, "k", admin.ForceOptions{Reason: "r"}); return err },
		"Force without reason": func() error { _, err := a.ForceRelease(ctx, "k", admin.ForceOptions{}); return err },
		"Force long reason": func() error {
			_, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Reason: strings.Repeat("r", 1025)})
			return err
		},
		"Force long by": func() error {
			_, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "r", By: strings.Repeat("b", 1025)})
			return err
		},
		"Force negative token": func() error {
			_, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Token: -1, Reason: "r"})
			return err
		},
		"Force invalid UTF-8": func() error { _, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "\xff"}); return err },
		"Force invalid UTF-8 by": func() error {
			_, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "r", By: "\xff"})
			return err
		},
		"Force empty key": func() error { _, err := a.ForceRelease(ctx, "", admin.ForceOptions{Reason: "r"}); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := testutil.Safely(t, 5*time.Second, call)
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			assert.ErrorContains(t, err, "invalid argument")
		})
	}
	after, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Equal(t, evalCalls(before), evalCalls(after), "bad input must not reach Redis")
	assert.Nil(t, nilAdmin.Held())

	ext := adminOf(t, testutil.WithBackend(t, plain{newMemory()}))
	_, err = ext.Inspect(ctx, "k")
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "Inspect on a backend without inspection: %v", err)
	_, err = ext.List(ctx, admin.ListOptions{})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ext.ListAll(ctx, admin.ListOptions{})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ext.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "r"})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ext.ForceRelease(ctx, "k", admin.ForceOptions{})
	assert.ErrorIs(t, err, mutex.ErrInvalid, "bad input first, whatever the backend")
}
