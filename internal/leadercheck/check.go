package leadercheck

import (
	"fmt"
	"slices"
	"time"
)

// Overlap is two beliefs that held at once for By, more than the margin
// allowed.
type Overlap struct {
	A, B Belief
	By   time.Duration
}

func (o Overlap) String() string {
	return fmt.Sprintf("%s (term %d, %s..%s) and %s (term %d, %s..%s) both led for %v",
		o.A.Who, o.A.Term, stamp(o.A.Start), stamp(o.A.End), o.B.Who, o.B.Term, stamp(o.B.Start), stamp(o.B.End), o.By)
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// Overlaps returns every pair of beliefs (of different terms) that held at
// once for longer than margin: the clock-drift margin, since the candidates
// share one wall clock but each lock's deadline keeps that margin to the
// server's expiry. An empty belief (End before Start) overlaps nothing.
func Overlaps(bs []Belief, margin time.Duration) []Overlap {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b Belief) int { return a.Start.Compare(b.Start) })
	var out []Overlap
	for i, a := range bs {
		for _, b := range bs[i+1:] {
			if !b.Start.Before(a.End) {
				break // sorted by start: the later ones begin later still
			}
			if a.Term == b.Term || !b.End.After(b.Start) {
				continue
			}
			end := a.End
			if b.End.Before(end) {
				end = b.End
			}
			if by := end.Sub(b.Start); by > margin {
				out = append(out, Overlap{A: a, B: b, By: by})
			}
		}
	}
	return out
}

// TermOrder returns what is wrong with the terms: ordered by when their
// leaders began, they must strictly increase (each term issued once).
func TermOrder(bs []Belief) []string {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b Belief) int { return a.Start.Compare(b.Start) })
	var out []string
	for i := 1; i < len(bs); i++ {
		if a, b := bs[i-1], bs[i]; b.Term <= a.Term {
			out = append(out, fmt.Sprintf("%s led with term %d at %s after %s had term %d at %s",
				b.Who, b.Term, stamp(b.Start), a.Who, a.Term, stamp(a.Start)))
		}
	}
	return out
}

// OutsideBelief returns the writes decided while their writer did not
// believe it led with their term: a candidate that goes on after its term
// ended or its deadline passed. A write of a term nobody reported leading
// is outside too.
func OutsideBelief(bs []Belief, ws []Write) []Write {
	byKey := map[string]Belief{}
	for _, b := range bs {
		byKey[fmt.Sprint(b.Who, "/", b.Term)] = b
	}
	var out []Write
	for _, w := range ws {
		b, ok := byKey[fmt.Sprint(w.Who, "/", w.Term)]
		if !ok || w.Decided.Before(b.Start) || w.Decided.After(b.End) {
			out = append(out, w)
		}
	}
	return out
}

// Backwards counts the places where the terms a resource accepted, in
// commit order, went down: the fence let a deposed leader write after a
// newer term had. Equal neighbours are one leader writing twice.
func Backwards(accepted []int64) int {
	n := 0
	for i := 1; i < len(accepted); i++ {
		if accepted[i] < accepted[i-1] {
			n++
		}
	}
	return n
}
