// Package clusterslot computes a key's Redis Cluster hash slot as the
// server does, without asking it: the lock drivers order keys by slot
// (mutex.LockAll), and redisfence checks that a transaction's keys share
// one.
package clusterslot

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Of is the Cluster hash slot of key: CRC16 (XMODEM) of the key's hash tag,
// the bytes between its first '{' and the first '}' after it when there
// are any, else of the whole key; modulo 16384.
func Of(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) & (Slots - 1))
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
