package lockview_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex/admin"
)

// Keys and owner ids are anyone's bytes: shown, they carry no control or
// bidirectional character, and no two print alike.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"acct:1 é":          "acct:1 é",
		"a\tb\nc\x1b[2J":    `"a\tb\nc\x1b[2J"`,
		`tab\there`:         `tab\there`,
		"tab\there":         `"tab\there"`,
		`"tab\there"`:       `"\"tab\\there\""`,
		"\xff":              `"\xff"`,
		"\u009b":            `"\u009b"`,
		"rtl\u202eevil":     `"rtl\u202eevil"`,
		"bin\x00\xff\xfe":   `"bin\x00\xff\xfe"`,
		"bell\a and escape": `"bell\a and escape"`,
		"k ":                `"k "`,
		" k":                `" k"`,
		"k k":               "k k",
	} {
		assert.Equal(t, want, lockview.Visible(in), "%q", in)
	}
}

// A key that is not UTF-8 keeps its exact bytes in key_hex; times and
// durations are written as the schema says.
func TestLockOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 22, 0, 0, 123456789, time.UTC)
	in := admin.LockInfo{
		Key: "bin\x00\xff", State: admin.Held, Token: 7, AcquiredAt: now.Add(-1500 * time.Microsecond),
		RenewedAt: now, Lease: 2500*time.Millisecond + 300*time.Microsecond, ServerTime: now,
	}
	b, err := json.Marshal(lockview.LockOf(in))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, "62696e00ff", got["key_hex"])
	assert.Equal(t, "2026-12-01T22:00:00.123456Z", got["server_time"])
	assert.Equal(t, 1.5, got["held_ms"])
	assert.Equal(t, 2500.3, got["lease_ms"])
	assert.Nil(t, got["owner_info"])
	assert.Contains(t, got, "acquired_at")

	in.Key = "plain"
	b, err = json.Marshal(lockview.LockOf(in))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "key_hex")
	b, err = json.Marshal(lockview.LockOf(admin.LockInfo{Key: "free"}))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"acquired_at":null`)
	assert.Contains(t, string(b), `"held_ms":null`)
}

// Every field either view writes is in the schema that help prints.
func TestSchemaDocNamesEveryField(t *testing.T) {
	for _, v := range []any{lockview.Lock{}, lockview.Inspection{}, lockview.Listing{}, lockview.Owner{}, lockview.Waiter{}, lockview.Forced{}, lockview.Node{}, lockview.Semaphore{}, lockview.Permit{}, lockview.RWLock{}} {
		for _, name := range JSONFields(reflect.TypeOf(v)) {
			assert.Regexp(t, `\b`+regexp.QuoteMeta(name)+`\b`, lockview.SchemaDoc, "%T.%s", v, name)
		}
	}
}

// JSONFields lists the JSON names of t's fields, those of embedded structs
// included.
func JSONFields(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			names = append(names, JSONFields(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// A listing's semaphores and rwlocks are absent unless the store lists
// them, and [] when it listed none: absence claims nothing. A key that is
// not UTF-8 keeps its bytes in key_hex, as a lock's does.
func TestListingHolds(t *testing.T) {
	fields := func(ls lockview.Listing) map[string]json.RawMessage {
		b, err := json.Marshal(ls)
		require.NoError(t, err)
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &doc))
		return doc
	}
	var ls lockview.Listing
	lockview.ListingHolds(&ls, false, []admin.SemaphoreInfo{{Key: "s"}}, nil)
	doc := fields(ls)
	assert.NotContains(t, doc, "semaphores")
	assert.NotContains(t, doc, "rwlocks")

	lockview.ListingHolds(&ls, true, nil, nil)
	doc = fields(ls)
	assert.JSONEq(t, `[]`, string(doc["semaphores"]))
	assert.JSONEq(t, `[]`, string(doc["rwlocks"]))

	writer := admin.Holder{Owner: "w", Token: 7, Lease: 1500 * time.Microsecond}
	lockview.ListingHolds(&ls, true,
		[]admin.SemaphoreInfo{{Key: "p\xff", Limit: 2, Holders: []admin.Holder{{Owner: "o", Token: 5, Lease: time.Second}}}},
		[]admin.RWLockInfo{{Key: "rw", Writer: &writer, LastWrite: 7}})
	doc = fields(ls)
	assert.JSONEq(t, `[{"key": "p\ufffd", "key_hex": "70ff", "limit": 2,
		"holders": [{"owner": "o", "owner_info": null, "lease_ms": 1000, "token": 5}]}]`, string(doc["semaphores"]))
	assert.JSONEq(t, `[{"key": "rw", "writer": {"owner": "w", "owner_info": null, "lease_ms": 1.5, "token": 7},
		"readers": [], "writers_waiting": 0, "last_write_token": 7}]`, string(doc["rwlocks"]))
}

// held_as names what holds a key: its lock (held or reserved), a permit
// of its semaphore, a hold of its read-write lock; [] when nothing does,
// a waiting writer alone included.
func TestHeldAs(t *testing.T) {
	permit := []lockview.Permit{{Owner: "o"}}
	for _, c := range []struct {
		name string
		in   admin.LockInfo
		sem  *lockview.Semaphore
		rw   *lockview.RWLock
		want []string
	}{
		{"nothing", admin.LockInfo{}, nil, nil, []string{}},
		{"a limit, no permit", admin.LockInfo{}, &lockview.Semaphore{Limit: 3}, &lockview.RWLock{Waiting: 1}, []string{}},
		{"reserved", admin.LockInfo{State: admin.Reserved}, nil, nil, []string{"lock"}},
		{"permits", admin.LockInfo{}, &lockview.Semaphore{Limit: 3, Holders: permit}, nil, []string{"semaphore"}},
		{"readers", admin.LockInfo{}, nil, &lockview.RWLock{Readers: permit}, []string{"rwlock"}},
		{"all", admin.LockInfo{State: admin.Held}, &lockview.Semaphore{Holders: permit}, &lockview.RWLock{Writer: &permit[0]},
			[]string{"lock", "semaphore", "rwlock"}},
	} {
		assert.Equal(t, c.want, lockview.HeldAs(c.in, c.sem, c.rw), c.name)
	}
}
