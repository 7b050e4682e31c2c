package lockdebug

import (
	"encoding/hex"
	"unicode/utf8"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/lockview"
)

// page is what one request shows, as HTML (page.html) or JSON (lockview's
// schema).
type page struct {
	Schema  int           `json:"schema"`
	Now     lockview.Time `json:"time"`
	Host    string        `json:"host"`
	PID     int           `json:"pid"`
	Error   string        `json:"error,omitempty"` // a bad parameter
	Lockers []lockerView  `json:"lockers"`
	Listing *listingView  `json:"listing,omitempty"`
	q       query
	named   []Named // the handler's Lockers
}

// lockerView is one Locker's section: the locks it holds.
type lockerView struct {
	Name      string    `json:"name"`
	Error     string    `json:"error,omitempty"` // why it has no admin.Admin (a nil Locker)
	HeldTotal int       `json:"held_total"`
	Held      []heldRow `json:"held"` // the first maxHeld by key
	// Campaigns: the candidates of the Named's Elections, by election.
	Campaigns []campaignRow `json:"campaigns,omitempty"`
}

// campaignRow is one candidate of this process in an election: a Campaign
// in progress (Term 0) or a term it leads.
type campaignRow struct {
	Election string        `json:"election"`
	Value    string        `json:"value"`
	Term     int64         `json:"term"`
	Since    lockview.Time `json:"since"`
}

func campaignRows(es []*election.Election) []campaignRow {
	var out []campaignRow
	for _, e := range es {
		if e == nil {
			continue
		}
		for _, c := range e.Candidacies() {
			out = append(out, campaignRow{Election: e.Name(), Value: c.Value, Term: c.Term, Since: lockview.Time(c.Since)})
		}
	}
	return out
}

// maxHeld bounds the locks a section shows.
const maxHeld = 1000

type heldRow struct {
	Key          string          `json:"key"`
	KeyHex       string          `json:"key_hex,omitempty"`
	Token        int64           `json:"token"`
	Acquired     lockview.Time   `json:"acquired"`
	HeldFor      lockview.Millis `json:"held_ms"`
	Lease        lockview.Millis `json:"lease_ms"`
	TTL          lockview.Millis `json:"ttl_ms"`
	Count        int             `json:"count"`
	AutoRenew    bool            `json:"auto_renew"`
	Renewals     int             `json:"renewals"`
	LastRenewal  lockview.Millis `json:"last_renewal_ms"` // 0 before the first
	LocalWaiters int             `json:"local_waiters"`
	Permit       bool            `json:"permit,omitempty"` // a permit of the semaphore named Key, not a lock
	RW           string          `json:"rw,omitempty"`     // "read" or "write": a hold of the read-write lock named Key
}

func heldView(n Named, op operator) lockerView {
	v := lockerView{Name: n.Name, Held: []heldRow{}, Campaigns: campaignRows(n.Elections)}
	if op.err != nil {
		v.Error = op.err.Error()
		return v
	}
	held := op.a.Held()
	v.HeldTotal = len(held)
	for _, h := range held[:min(len(held), maxHeld)] {
		row := heldRow{
			Key: h.Key, Token: h.Token, Acquired: lockview.Time(h.Acquired), HeldFor: lockview.Millis(h.HeldFor),
			Lease: lockview.Millis(h.Lease), TTL: lockview.Millis(h.TTL), Count: h.Count, AutoRenew: h.AutoRenew,
			Renewals: h.Renewals, LastRenewal: lockview.Millis(h.LastRenewal), LocalWaiters: h.Waiters,
			Permit: h.Permit, RW: h.RW,
		}
		if !utf8.ValidString(h.Key) {
			row.KeyHex = hex.EncodeToString([]byte(h.Key))
		}
		v.Held = append(v.Held, row)
	}
	return v
}

// listingView is one page of the cluster-wide listing: lockview's listing
// and where it stands.
type listingView struct {
	Locker     string `json:"locker"`
	Match      string `json:"match"`
	Cursor     string `json:"cursor"`
	NextCursor string `json:"next_cursor"` // "" at the end
	RoundTrips int    `json:"round_trips"`
	Error      string `json:"error,omitempty"`
	lockview.Listing
	next string // the next page's address
}

// Next is the next page's address, "" at the end (page.html).
func (lv *listingView) Next() string { return lv.next }

// The page's links and form values (page.html).

func (p *page) JSONURL() string { return p.q.url(p.named, true) }
func (p *page) All() bool       { return p.q.all }
func (p *page) Match() string   { return p.q.match }

// ListURL starts the cluster-wide listing with the current match.
func (p *page) ListURL() string {
	q := p.q
	q.all, q.cursor = true, ""
	return q.url(p.named, false)
}

// Choices are the Lockers that can list, for the form's select; nil when
// there is only one.
func (p *page) Choices() []choice {
	if len(p.named) < 2 {
		return nil
	}
	out := make([]choice, len(p.named))
	for i, n := range p.named {
		out[i] = choice{Name: n.Name, Selected: i == p.q.locker}
	}
	return out
}

type choice struct {
	Name     string
	Selected bool
}
