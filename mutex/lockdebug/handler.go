package lockdebug

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
)

// Named is a Locker shown on the page under a name: for a process with
// several Lockers (one per Redis deployment, say), the name says which
// section is which and selects the Locker that lists (locker=name).
type Named struct {
	Name   string
	Locker *mutex.Locker
	// Elections are this process's elections over Locker (package
	// election): the section lists their campaigns in progress and the
	// terms they lead.
	Elections []*election.Election
}

// Handler returns the debug page of lockers, named "locker 1", "locker 2",
// ... in the order given (a single one: "locker"). See the package
// documentation for what it shows and how to mount it: on an internal or
// admin mux only, as net/http/pprof.
func Handler(lockers ...*mutex.Locker) http.Handler {
	named := make([]Named, len(lockers))
	for i, l := range lockers {
		named[i] = Named{Name: "locker " + strconv.Itoa(i+1), Locker: l}
	}
	if len(named) == 1 {
		named[0].Name = "locker"
	}
	return NamedHandler(named...)
}

// NamedHandler is Handler with a name for each Locker. A struct rather
// than an option: the name belongs to one Locker, the list keeps its order,
// and the one-Locker case stays Handler(locker). An empty name is replaced
// by the Locker's position ("locker 2"); of two equal names, locker=name
// selects the first. A nil Locker is shown with its error (admin.New's);
// nothing is checked or panics later.
func NamedHandler(lockers ...Named) http.Handler {
	h := &handler{
		lockers: make([]Named, len(lockers)),
		admins:  make([]operator, len(lockers)),
		pid:     os.Getpid(),
	}
	h.host, _ = os.Hostname()
	for i, n := range lockers {
		if n.Name == "" {
			n.Name = "locker " + strconv.Itoa(i+1)
		}
		h.lockers[i] = n
		h.admins[i].a, h.admins[i].err = admin.New(n.Locker)
	}
	return h
}

// listTimeout bounds the one List call of a request.
const listTimeout = 5 * time.Second

type handler struct {
	lockers []Named
	admins  []operator // one per lockers[i]
	host    string
	pid     int
}

// operator is a Named's admin.Admin, or why there is none (a nil Locker).
type operator struct {
	a   *admin.Admin
	err error
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "lockdebug: method "+r.Method+" not allowed: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hdr.Add("Vary", "Accept")

	q, qerr := parseQuery(r, h.lockers)
	p := &page{
		Schema: lockview.Schema,
		Now:    lockview.Time(time.Now()),
		Host:   h.host,
		PID:    h.pid,
		q:      q,

		Lockers: make([]lockerView, 0, len(h.lockers)),
		named:   h.lockers,
	}
	status := http.StatusOK
	if qerr != nil {
		p.Error = qerr.Error()
		status = http.StatusBadRequest
	}
	for i, n := range h.lockers {
		p.Lockers = append(p.Lockers, heldView(n, h.admins[i]))
	}
	if qerr == nil && q.all {
		p.Listing, status = h.list(r.Context(), q)
	}
	if q.json {
		writeJSON(w, status, p)
		return
	}
	writeHTML(w, status, p)
}

// list makes the request's one List call and the status it leads to.
func (h *handler) list(ctx context.Context, q query) (*listingView, int) {
	n, op := h.lockers[q.locker], h.admins[q.locker]
	lv := &listingView{Locker: n.Name, Match: q.match, Cursor: q.cursor}
	lv.Listing = lockview.Listing{Schema: lockview.Schema, Skipped: []string{}, Locks: []lockview.Lock{}}
	if op.err != nil {
		lv.Error = "locker " + strconv.Quote(n.Name) + " cannot list: " + op.err.Error()
		return lv, http.StatusInternalServerError
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	pg, err := op.a.List(ctx, admin.ListOptions{Match: q.match, Cursor: q.cursor, Scans: q.scans, Count: q.count})
	if err != nil {
		lv.Error = err.Error()
		switch {
		case errors.Is(err, mutex.ErrInvalid):
			return lv, http.StatusBadRequest
		case errors.Is(err, errors.ErrUnsupported):
			return lv, http.StatusNotImplemented
		}
		return lv, http.StatusBadGateway
	}
	lv.RoundTrips = pg.RoundTrips
	lv.NextCursor = pg.Cursor
	lv.Complete = len(pg.Skipped) == 0
	for _, err := range pg.Skipped {
		lv.Skipped = append(lv.Skipped, err.Error())
	}
	_, queued := n.Locker.Backend().(backend.Queuer)
	for _, in := range pg.Locks {
		j := lockview.LockOf(in)
		if !queued {
			j.NoQueue = "this store keeps no queue of waiting Lockers"
		}
		lv.Locks = append(lv.Locks, j)
	}
	slices.SortStableFunc(lv.Locks, func(a, b lockview.Lock) int { return strings.Compare(a.Key, b.Key) })
	lockview.ListingHolds(&lv.Listing, pg.HoldsListed, pg.Semaphores, pg.RWLocks)
	slices.SortStableFunc(lv.Semaphores, func(a, b lockview.ListedSemaphore) int { return strings.Compare(a.Key, b.Key) })
	slices.SortStableFunc(lv.RWLocks, func(a, b lockview.ListedRWLock) int { return strings.Compare(a.Key, b.Key) })
	if pg.Cursor != "" {
		next := q
		next.cursor = pg.Cursor
		lv.next = next.url(h.lockers, false)
	}
	return lv, http.StatusOK
}

func writeJSON(w http.ResponseWriter, status int, p *page) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		http.Error(w, "lockdebug: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func writeHTML(w http.ResponseWriter, status int, p *page) {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		http.Error(w, "lockdebug: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
