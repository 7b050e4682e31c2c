package cli

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// elections shows the leader of each election from outside its process:
// value, term, since and the owner info of the Locker that holds its lock;
// a pattern narrows the list.
func TestElections(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := redistest.Locker(t, c)
	url := "redis://" + srv.Addr()
	elections := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"--redis", url, "elections"}, args...), noEnv, nil, &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		return stdout.String()
	}
	assert.Equal(t, "no election has a candidate holding its lock whose name matches \"*\"\n", elections())

	var terms []*election.Term
	for _, name := range []string{"billing", "reports"} {
		e, err := election.New(l, name)
		require.NoError(t, err)
		term, err := e.Campaign(ctx, "host-"+name)
		require.NoError(t, err)
		terms = append(terms, term)
	}
	out := elections()
	for _, term := range terms {
		assert.Regexp(t, `\n`+term.Value()[5:]+` +`+term.Value()+` +`+strconv.FormatInt(term.Token(), 10)+` +`+
			term.Since().UTC().Format("2006-01-02T15:04:05")+`\S* +`+regexp.QuoteMeta(printed(mutex.OwnerInfo{}))+`\n`, out,
			"the Locker that holds the term's lock: its host and pid")
	}
	assert.NotContains(t, elections("bill*"), "reports")
	for _, term := range terms {
		require.NoError(t, term.Release(ctx))
	}
}
