// Package ownerid is the shape of the owner ids a Locker makes, which
// package mutex writes and mutex/admin reads back for operators.
package ownerid

import (
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
)

// The owner ids a Locker makes (one per attempt, and its own id in the
// waiting queues) are 32 random hex digits, '@', and the Locker's OwnerInfo
// as a query string: "5f0c…e1@h=web-7&p=4121&s=billing". The random part
// keeps them unique; the rest is what inspection shows, written by the
// acquisition itself. WithOwner ids are the caller's and carry none.
const RandLen = 32

// Info is mutex.OwnerInfo, field for field.
type Info struct {
	Service string
	Host    string
	PID     int
	Label   string
}

// Encode is the suffix of every owner id the Locker makes, with
// the defaults filled in.
func Encode(info Info) string {
	if info.Host == "" {
		info.Host, _ = os.Hostname()
	}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	v := url.Values{}
	if info.Host != "" {
		v.Set("h", info.Host)
	}
	v.Set("p", strconv.Itoa(info.PID))
	if info.Service != "" {
		v.Set("s", info.Service)
	}
	if info.Label != "" {
		v.Set("l", info.Label)
	}
	return "@" + v.Encode()
}

// Parse reads back the Info of an owner id a Locker made; ok is
// false for any other id (WithOwner's).
func Parse(owner string) (info Info, ok bool) {
	if len(owner) <= RandLen || owner[RandLen] != '@' {
		return Info{}, false
	}
	if _, err := hex.DecodeString(owner[:RandLen]); err != nil {
		return Info{}, false
	}
	v, err := url.ParseQuery(owner[RandLen+1:])
	if err != nil {
		return Info{}, false
	}
	info = Info{Service: v.Get("s"), Host: v.Get("h"), Label: v.Get("l")}
	if p := v.Get("p"); p != "" {
		if info.PID, err = strconv.Atoi(p); err != nil {
			return Info{}, false
		}
	}
	return info, true
}
