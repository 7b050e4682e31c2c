package admin

import (
	"strings"

	"github.com/redfence/redfence/internal/hostlink"
	"github.com/redfence/redfence/internal/ownerid"
	"github.com/redfence/redfence/mutex"
)

// maxOwnerID is the longest owner id mutex.WithOwner takes.
const maxOwnerID = 512

// OwnerID is id, an explicit owner id (mutex.WithOwner), followed by what
// ends every owner id l makes: "@" and l's OwnerInfo. Inspection reads
// that OwnerInfo back from it as from the ids l makes (LockInfo.Info), so
// that the holder's host and pid show; package election names its
// leaders so. When the two together exceed the 512 bytes WithOwner takes,
// or l is nil, id is returned as it is.
func OwnerID(l *mutex.Locker, id string) string {
	if l == nil {
		return id
	}
	suffix := hostlink.ID(l)[ownerid.RandLen:]
	if len(id)+len(suffix) > maxOwnerID {
		return id
	}
	return id + suffix
}

// SplitOwnerID reads back an owner id OwnerID made: the id it was given
// and the OwnerInfo of its Locker. ok is false, and owner comes back
// whole, for an id that does not end in "@" and an OwnerInfo with a pid
// as OwnerID writes it. An id the Locker made itself splits too, into its
// random part and its OwnerInfo.
func SplitOwnerID(owner string) (id string, info mutex.OwnerInfo, ok bool) {
	i := strings.LastIndexByte(owner, '@')
	if i < 0 {
		return owner, mutex.OwnerInfo{}, false
	}
	// The suffix as package ownerid reads a Locker's ids: behind a random
	// part, here of zeros.
	in, ok := ownerid.Parse(strings.Repeat("0", ownerid.RandLen) + owner[i:])
	if !ok || in.PID <= 0 {
		return owner, mutex.OwnerInfo{}, false
	}
	return owner[:i], mutex.OwnerInfo(in), true
}

// parseOwner is the OwnerInfo an owner id carries: one the Locker made,
// or one OwnerID made.
func parseOwner(owner string) (mutex.OwnerInfo, bool) {
	if info, ok := ownerid.Parse(owner); ok {
		return mutex.OwnerInfo(info), true
	}
	_, info, ok := SplitOwnerID(owner)
	return info, ok
}
