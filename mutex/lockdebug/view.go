package lockdebug

import (
	"strconv"
	"strings"
	"time"

	"github.com/redfence/redfence/mutex"
)

// page is what one request shows, as HTML (page.html) or JSON.
type page struct {
	Now     time.Time    `json:"time"`
	Host    string       `json:"host"`
	PID     int          `json:"pid"`
	Error   string       `json:"error,omitempty"` // a bad parameter
	Lockers []lockerView `json:"lockers"`
	Listing *listingView `json:"listing,omitempty"`
	q       query
	named   []Named // the handler's Lockers
}

// lockerView is one Locker's section: the locks it holds.
type lockerView struct {
	Name      string    `json:"name"`
	Error     string    `json:"error,omitempty"` // Locker.Err
	HeldTotal int       `json:"held_total"`
	Held      []heldRow `json:"held"` // the first maxHeld by key
}

// maxHeld bounds the locks a section shows.
const maxHeld = 1000

type heldRow struct {
	Key         string    `json:"key"`
	Token       int64     `json:"token"`
	Acquired    time.Time `json:"acquired"`
	HeldFor     millis    `json:"held_ms"`
	Lease       millis    `json:"lease_ms"`
	TTL         millis    `json:"ttl_ms"`
	Count       int       `json:"count"`
	AutoRenew   bool      `json:"auto_renew"`
	Renewals    int       `json:"renewals"`
	LastRenewal millis    `json:"last_renewal_ms"` // 0 before the first
	Waiters     int       `json:"waiters"`
}

func heldView(n Named) lockerView {
	v := lockerView{Name: n.Name, Held: []heldRow{}}
	if err := n.Locker.Err(); err != nil {
		v.Error = err.Error()
		return v
	}
	held := n.Locker.Held()
	v.HeldTotal = len(held)
	for _, h := range held[:min(len(held), maxHeld)] {
		v.Held = append(v.Held, heldRow{
			Key: h.Key, Token: h.Token, Acquired: h.Acquired.UTC(), HeldFor: millis(h.HeldFor),
			Lease: millis(h.Lease), TTL: millis(h.TTL), Count: h.Count, AutoRenew: h.AutoRenew,
			Renewals: h.Renewals, LastRenewal: millis(h.LastRenewal), Waiters: h.Waiters,
		})
	}
	return v
}

// listingView is one page of the cluster-wide listing.
type listingView struct {
	Locker     string     `json:"locker"`
	Match      string     `json:"match"`
	Cursor     string     `json:"cursor"`
	NextCursor string     `json:"next_cursor"` // "" at the end
	RoundTrips int        `json:"round_trips"`
	Error      string     `json:"error,omitempty"`
	Locks      []infoView `json:"locks"`
	next       string     // the next page's address
}

// Next is the next page's address, "" at the end (page.html).
func (lv *listingView) Next() string { return lv.next }

type infoView struct {
	Key        string       `json:"key"`
	State      string       `json:"state"`
	Token      int64        `json:"token"`
	Owner      string       `json:"owner"` // the raw owner id
	OwnerInfo  *ownerView   `json:"owner_info,omitempty"`
	Count      int          `json:"count"`
	AcquiredAt time.Time    `json:"acquired_at,omitzero"`
	RenewedAt  time.Time    `json:"renewed_at,omitzero"`
	HeldFor    *millis      `json:"held_ms,omitempty"` // unknown when AcquiredAt is
	Lease      millis       `json:"lease_ms"`
	ServerTime time.Time    `json:"server_time"`
	Waiters    []waiterView `json:"waiters"`
}

type waiterView struct {
	Locker    string     `json:"locker"`
	OwnerInfo *ownerView `json:"owner_info,omitempty"`
	Since     time.Time  `json:"since,omitzero"`
	Waited    millis     `json:"waited_ms"`
}

type ownerView struct {
	Service string `json:"service,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Label   string `json:"label,omitempty"`
}

func ownerOf(info mutex.OwnerInfo) *ownerView {
	if info == (mutex.OwnerInfo{}) {
		return nil
	}
	return &ownerView{Service: info.Service, Host: info.Host, PID: info.PID, Label: info.Label}
}

// String is mutex.OwnerInfo's.
func (o *ownerView) String() string {
	return mutex.OwnerInfo{Service: o.Service, Host: o.Host, PID: o.PID, Label: o.Label}.String()
}

func infoOf(in mutex.LockInfo) infoView {
	v := infoView{
		Key: in.Key, State: in.State.String(), Token: in.Token, Owner: in.Owner,
		OwnerInfo: ownerOf(in.Info), Count: in.Count, AcquiredAt: utc(in.AcquiredAt),
		RenewedAt: utc(in.RenewedAt), Lease: millis(max(in.Lease, 0)),
		ServerTime: utc(in.ServerTime), Waiters: []waiterView{},
	}
	if !in.AcquiredAt.IsZero() && !in.ServerTime.IsZero() {
		d := millis(max(in.ServerTime.Sub(in.AcquiredAt), 0))
		v.HeldFor = &d
	}
	for _, w := range in.Waiters {
		v.Waiters = append(v.Waiters, waiterView{Locker: w.Locker, OwnerInfo: ownerOf(w.Info), Since: utc(w.Since), Waited: millis(w.Waited)})
	}
	return v
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Who is the owner as the page prints it: its OwnerInfo, or the raw id.
func (v infoView) Who() string {
	if v.OwnerInfo != nil {
		return v.OwnerInfo.String()
	}
	return v.Owner
}

// Longest is the longest wait among the waiters.
func (v infoView) Longest() millis {
	var d millis
	for _, w := range v.Waiters {
		d = max(d, w.Waited)
	}
	return d
}

// WaitersText lists the waiters, one a line, for a tooltip.
func (v infoView) WaitersText() string {
	var b strings.Builder
	for i, w := range v.Waiters {
		if i > 0 {
			b.WriteByte('\n')
		}
		who := w.Locker
		if w.OwnerInfo != nil {
			who = w.OwnerInfo.String()
		}
		b.WriteString(who + ": " + w.Waited.String())
	}
	return b.String()
}

// millis is a duration that JSON shows in milliseconds (to the
// microsecond) and the page in words ("8.21s").
type millis time.Duration

func (d millis) MarshalJSON() ([]byte, error) {
	ms := float64(time.Duration(d).Round(time.Microsecond)) / float64(time.Millisecond)
	return strconv.AppendFloat(nil, ms, 'f', -1, 64), nil
}

func (d millis) String() string {
	t := time.Duration(d)
	switch {
	case t <= 0:
		return "0"
	case t < time.Millisecond:
		return t.Round(time.Microsecond).String()
	case t < time.Second:
		return t.Round(100 * time.Microsecond).String()
	case t < time.Minute:
		return t.Round(10 * time.Millisecond).String()
	}
	return t.Round(time.Second).String()
}

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
