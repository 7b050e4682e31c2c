package mutex

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/redfence/redfence/internal/ownerid"
)

// ownerRandLen is the random part of the owner ids a Locker makes
// (package ownerid has their shape).
const ownerRandLen = ownerid.RandLen

// encodeOwnerInfo is the suffix of every owner id the Locker makes.
func encodeOwnerInfo(info OwnerInfo) string { return ownerid.Encode(ownerid.Info(info)) }

// parseOwner reads back the OwnerInfo of an owner id a Locker made.
func parseOwner(owner string) (OwnerInfo, bool) {
	info, ok := ownerid.Parse(owner)
	return OwnerInfo(info), ok
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
