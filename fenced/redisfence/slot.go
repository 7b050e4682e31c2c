package redisfence

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
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

// slot is the Cluster hash slot of key, as Redis computes it: CRC16 (XMODEM)
// of the key's hash tag, the bytes between its first '{' and the first '}'
// after it when there are any, else of the whole key; modulo 16384.
func slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) & 16383)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the variant
// Redis Cluster uses, bit by bit: keys are short, and a table would be 512
// bytes of package state for no measurable gain.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
