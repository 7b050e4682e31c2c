package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// The --json output. These types are the schema that doc.go documents:
// fields are only ever added. Times are RFC 3339 strings in UTC (null when
// unknown), durations integers of milliseconds.

// lockJSON is one key: an element of locks --json, and inspect --json
// (with forced_releases and, for Redlock, nodes).
type lockJSON struct {
	Key        string       `json:"key"`
	RedisKey   string       `json:"redis_key"`
	State      string       `json:"state"`
	Token      int64        `json:"token"`
	Owner      string       `json:"owner"`
	OwnerInfo  *ownerJSON   `json:"owner_info"`
	Count      int          `json:"count"`
	AcquiredAt *string      `json:"acquired_at"`
	RenewedAt  *string      `json:"renewed_at"`
	HeldMs     *int64       `json:"held_ms"`
	LeaseMs    int64        `json:"lease_ms"`
	Waited     bool         `json:"waited"`
	Waiters    []waiterJSON `json:"waiters"`
	ServerTime *string      `json:"server_time"`
}

type inspectJSON struct {
	lockJSON
	Forced []forcedJSON `json:"forced_releases"`
	Nodes  []nodeJSON   `json:"nodes,omitempty"`
}

type ownerJSON struct {
	Service string `json:"service"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Label   string `json:"label"`
}

type waiterJSON struct {
	Locker    string     `json:"locker"`
	OwnerInfo *ownerJSON `json:"owner_info"`
	Since     *string    `json:"since"`
	WaitedMs  int64      `json:"waited_ms"`
}

type forcedJSON struct {
	ID        string     `json:"id"`
	At        *string    `json:"at"`
	By        string     `json:"by"`
	Reason    string     `json:"reason"`
	Token     int64      `json:"token"`
	Floor     int64      `json:"floor"`
	Owner     string     `json:"owner"`
	OwnerInfo *ownerJSON `json:"owner_info"`
	Count     int        `json:"count"`
}

type nodeJSON struct {
	Node  int       `json:"node"`
	Addr  string    `json:"addr"`
	Error *string   `json:"error"`
	Lock  *lockJSON `json:"lock"`
}

type fenceJSON struct {
	Resource  string  `json:"resource"`
	Token     int64   `json:"token"`
	UpdatedAt *string `json:"updated_at"`
}

func toLockJSON(in mutex.LockInfo) lockJSON {
	j := lockJSON{
		Key: in.Key, RedisKey: in.Name, State: in.State.String(), Token: in.Token,
		Owner: in.Owner, OwnerInfo: toOwnerJSON(in.Info), Count: in.Count,
		AcquiredAt: jsonTime(in.AcquiredAt), RenewedAt: jsonTime(in.RenewedAt),
		LeaseMs: max(in.Lease, 0).Milliseconds(), Waited: in.Waited,
		Waiters: []waiterJSON{}, ServerTime: jsonTime(in.ServerTime),
	}
	if d, ok := heldFor(in); ok {
		ms := d.Milliseconds()
		j.HeldMs = &ms
	}
	for _, w := range in.Waiters {
		j.Waiters = append(j.Waiters, waiterJSON{
			Locker: w.Locker, OwnerInfo: toOwnerJSON(w.Info), Since: jsonTime(w.Since), WaitedMs: w.Waited.Milliseconds(),
		})
	}
	return j
}

func toInspectJSON(in mutex.LockInfo, explain func(error) string) inspectJSON {
	j := inspectJSON{lockJSON: toLockJSON(in), Forced: []forcedJSON{}}
	for _, f := range in.Forced {
		j.Forced = append(j.Forced, forcedJSON{
			ID: f.ID, At: jsonTime(f.At), By: f.By, Reason: f.Reason, Token: f.Token, Floor: f.Floor,
			Owner: f.Owner, OwnerInfo: toOwnerJSON(f.Info), Count: f.Count,
		})
	}
	for _, n := range in.Nodes {
		nj := nodeJSON{Node: n.Node, Addr: n.Addr}
		if n.Err != nil {
			msg := explain(n.Err)
			nj.Error = &msg
		} else {
			l := toLockJSON(n.Info)
			nj.Lock = &l
		}
		j.Nodes = append(j.Nodes, nj)
	}
	return j
}

// toOwnerJSON is nil for an owner without info (a WithOwner id, or none).
func toOwnerJSON(o mutex.OwnerInfo) *ownerJSON {
	if o == (mutex.OwnerInfo{}) {
		return nil
	}
	return &ownerJSON{Service: o.Service, Host: o.Host, PID: o.PID, Label: o.Label}
}

func toFenceJSON(f fenced.Fence) fenceJSON {
	return fenceJSON{Resource: f.Resource, Token: f.Token, UpdatedAt: jsonTime(f.UpdatedAt)}
}

// jsonTime is t as the schema writes times: nil for the zero time.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(timeLayout)
	return &s
}

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
