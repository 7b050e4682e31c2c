package mutex

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// The owner ids a Locker makes (one per attempt, and its own id in the
// waiting queues) are 32 random hex digits, '@', and the Locker's OwnerInfo
// as a query string: "5f0c…e1@h=web-7&p=4121&s=billing". The random part
// keeps them unique; the rest is what inspection shows, written by the
// acquisition itself. WithOwner ids are the caller's and carry none.
const ownerRandLen = 32

// encodeOwnerInfo is the suffix of every owner id the Locker makes, with
// the defaults filled in.
func encodeOwnerInfo(info OwnerInfo) string {
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

// parseOwner reads back the OwnerInfo of an owner id a Locker made; ok is
// false for any other id (WithOwner's).
func parseOwner(owner string) (info OwnerInfo, ok bool) {
	if len(owner) <= ownerRandLen || owner[ownerRandLen] != '@' {
		return OwnerInfo{}, false
	}
	if _, err := hex.DecodeString(owner[:ownerRandLen]); err != nil {
		return OwnerInfo{}, false
	}
	v, err := url.ParseQuery(owner[ownerRandLen+1:])
	if err != nil {
		return OwnerInfo{}, false
	}
	info = OwnerInfo{Service: v.Get("s"), Host: v.Get("h"), Label: v.Get("l")}
	if p := v.Get("p"); p != "" {
		if info.PID, err = strconv.Atoi(p); err != nil {
			return OwnerInfo{}, false
		}
	}
	return info, true
}

// newOwner is a fresh owner id of this Locker: one allocation.
func (l *Locker) newOwner() string {
	var b [ownerRandLen / 2]byte
	_, _ = rand.Read(b[:])
	var s strings.Builder
	s.Grow(ownerRandLen + len(l.ownerSuffix))
	var h [ownerRandLen]byte
	hex.Encode(h[:], b[:])
	s.Write(h[:])
	s.WriteString(l.ownerSuffix)
	return s.String()
}

// String is the info as inspection prints it: "billing on web-7 (pid 4121)
// [canary]", leaving out what is empty.
func (o OwnerInfo) String() string {
	var s strings.Builder
	s.WriteString(o.Service)
	if o.Host != "" {
		if s.Len() > 0 {
			s.WriteString(" on ")
		}
		s.WriteString(o.Host)
	}
	if o.PID != 0 {
		if s.Len() > 0 {
			s.WriteByte(' ')
		}
		s.WriteString("(pid " + strconv.Itoa(o.PID) + ")")
	}
	if o.Label != "" {
		if s.Len() > 0 {
			s.WriteByte(' ')
		}
		s.WriteString("[" + o.Label + "]")
	}
	return s.String()
}
