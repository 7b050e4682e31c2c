package redisfence

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"

	"github.com/redfence/redfence/internal/clusterslot"
)

// Tag returns the hash tag of resource's fence key: "{" + resource + "}",
// or, when resource holds a brace (which would end the tag early or leave
// it empty), "{{" + the hex SHA-1 of resource + "}". The second brace keeps
// the two forms apart: no resource's tag is another's (a tag "{<hex>}" is
// the resource "<hex>"'s). Put it in every data key that Do is given for
// resource, as the key's first pair of braces ("balance:" + Tag(resource)),
// so that on a Cluster the key shares the fence key's slot. mutex tags a
// lock key without braces the same way, so a lock on such a key k and the
// fence of resource k share a slot too.
func Tag(resource string) string {
	if strings.ContainsAny(resource, "{}") {
		sum := sha1.Sum([]byte(resource))
		return "{{" + hex.EncodeToString(sum[:]) + "}"
	}
	return "{" + resource + "}"
}

// fenceKey is the key that holds resource's highest token. A hashed tag is
// followed by the resource itself, so that the key still names it.
func fenceKey(prefix, resource string) string {
	tag := Tag(resource)
	if tag[1:len(tag)-1] != resource {
		return prefix + tag + resource
	}
	return prefix + tag
}

// slot is the Cluster hash slot of key, as Redis computes it.
func slot(key string) int { return clusterslot.Of(key) }
