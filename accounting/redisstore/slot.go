package redisstore

import (
	"strconv"
	"strings"
	"sync"
)

// slotCount is the number of hash slots of a Redis Cluster.
const slotCount = 16384

// crc16 is the CRC16 Redis Cluster hashes keys with: CCITT polynomial
// 0x1021, initial value 0, bits not reflected, no final xor (XMODEM).
// Computed bit by bit: a key is short, and a table would be one more
// piece of package state for nothing the benchmarks can see.
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

// keySlot is the hash slot of key, as CLUSTER KEYSLOT computes it: when
// the key holds a '{' followed later by a '}' with something between
// them, only what lies between the first '{' and the first '}' after it
// is hashed.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % slotCount
}

// slotTags returns, for every hash slot, a short hash tag that hashes to
// it: the Store names a group's record after its slot's tag, so that a
// reservation's record in a slot has one key whichever of the
// reservation's items a call names (a settlement names fewer items than
// the reservation when optional ones were left uncharged). The table is
// computed once, on first use, by trying "0", "1", … in turn (about
// 170,000 CRCs, a few milliseconds), and never changes.
var slotTags = sync.OnceValue(func() *[slotCount]string {
	var t [slotCount]string
	for n, left := 0, slotCount; left > 0; n++ {
		tag := strconv.Itoa(n)
		if s := int(crc16(tag)) % slotCount; t[s] == "" {
			t[s] = tag
			left--
		}
	}
	return &t
})
