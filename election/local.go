package election

import (
	"cmp"
	"slices"
	"time"
)

// Candidacy is one of this process's candidates in an election: a Campaign
// call in progress (Term 0) or a term it leads.
type Candidacy struct {
	Value string
	Since time.Time // when the Campaign call began, or the term
	Term  int64     // 0 while campaigning
}

// Candidacies lists this process's campaigns in progress (Run's included)
// and the terms it leads and that have not ended, terms first, then by
// Since: what a debug page of the process shows (mutex/lockdebug). It makes
// no round trip.
func (e *Election) Candidacies() []Candidacy {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	out := make([]Candidacy, 0, len(e.campaigns)+len(e.terms))
	for t := range e.terms {
		out = append(out, Candidacy{Value: t.value, Since: t.since, Term: t.Token()})
	}
	for c := range e.campaigns {
		out = append(out, Candidacy{Value: c.value, Since: c.since})
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b Candidacy) int {
		if (a.Term == 0) != (b.Term == 0) {
			return cmp.Compare(b.Term, a.Term) // terms first
		}
		return a.Since.Compare(b.Since)
	})
	return out
}

// campaign is one Campaign call in progress.
type campaign struct {
	value string
	since time.Time
}

func (e *Election) track(value string) *campaign {
	c := &campaign{value: value, since: time.Now()}
	e.mu.Lock()
	e.campaigns[c] = struct{}{}
	e.mu.Unlock()
	return c
}

func (e *Election) untrack(c *campaign) {
	e.mu.Lock()
	delete(e.campaigns, c)
	e.mu.Unlock()
}

func (e *Election) addTerm(t *Term) {
	e.mu.Lock()
	e.terms[t] = struct{}{}
	e.mu.Unlock()
}

func (e *Election) dropTerm(t *Term) {
	e.mu.Lock()
	delete(e.terms, t)
	e.mu.Unlock()
}
