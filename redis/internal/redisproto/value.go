package redisproto

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A lock key's value, as acquire.lua writes it: "<token> <count>
// <from-us>+<lease-ms> <waited> <owner>" while held (count 0: reserved for
// the Locker named as owner), "<token>" alone once released.

// ReleaseValue is the value an acquisition wrote when its token was the
// server time, which release.lua compares whole in its common case:
// "<token> 1 <token>+<lease-ms> 0 <owner>". A lease of 0 ms is never
// written, so an unknown lease always takes the script's slow path.
func ReleaseValue(owner, token string, lease time.Duration) string {
	var b strings.Builder
	b.Grow(2*len(token) + len(owner) + 32)
	b.WriteString(token)
	b.WriteString(" 1 ")
	b.WriteString(token)
	b.WriteByte('+')
	var ms [20]byte
	b.Write(strconv.AppendInt(ms[:0], lease.Milliseconds(), 10))
	b.WriteString(" 0 ")
	b.WriteString(owner)
	return b.String()
}

// Value is a lock key's value, read.
type Value struct {
	Token    int64
	Released bool // "<token>" alone: free, the fencing counter kept
	Count    int
	From     time.Time // the lease's start by the server's clock; zero when unreadable
	Lease    time.Duration
	Waited   bool
	Owner    string
	// Issued is the token read as the server time it mostly is (zero when
	// it cannot be one).
	Issued time.Time
}

// ParseValue reads a lock key's value; ok is false for "" and for a value
// of no known shape, which acquire.lua takes as free.
func ParseValue(s string) (v Value, ok bool) {
	if s == "" {
		return v, false
	}
	f := strings.SplitN(s, " ", 5)
	if len(f) == 1 {
		v.Token, _ = strconv.ParseInt(f[0], 10, 64)
		v.Released = true
		return v, true
	}
	if len(f) != 5 {
		return v, false
	}
	lease := strings.SplitN(f[2], "+", 2)
	if len(lease) != 2 {
		return v, false
	}
	ms, _ := strconv.ParseInt(lease[1], 10, 64)
	v.From, v.Lease = MicroTime(lease[0]), time.Duration(ms)*time.Millisecond
	v.Token, _ = strconv.ParseInt(f[0], 10, 64)
	v.Count, _ = strconv.Atoi(f[1])
	v.Waited = f[3] == "1"
	v.Owner = f[4]
	v.Issued = MicroTime(f[0])
	return v, true
}

// MicroTime reads µs since the epoch; zero unless it lies between 2000 and
// 2200, where a Redis clock can be.
func MicroTime(s string) time.Time {
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil || us < 946684800_000000 || us > 7258118400_000000 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// ParseAcquire reads acquire.lua's reply as {status, token, remaining ms}:
// the token alone when acquired, minus the remaining lease when held, a
// table when re-entered. tokenStr is the token as the script wrote it,
// when it sent a string: the Lock keeps it and formats nothing.
func ParseAcquire(reply any) (n [3]int64, tokenStr string, err error) {
	switch r := reply.(type) {
	case int64:
		if r < 0 {
			return [3]int64{0, 0, -r}, "", nil
		}
	case string:
		tok, err := strconv.ParseInt(r, 10, 64)
		if err != nil {
			return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %w", err)
		}
		return [3]int64{1, tok, 0}, r, nil
	case []any:
		if len(r) != 3 {
			break
		}
		for i, v := range r {
			if n[i], err = replyInt(v); err != nil {
				return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %w", err)
			}
		}
		tokenStr, _ = r[1].(string)
		return n, tokenStr, nil
	}
	return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %v", reply)
}

// replyInt reads an integer of a script reply: a Redis integer, or digits
// in a bulk string (the acquire script passes its token on as it wrote it).
func replyInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T", v)
}

// ParseAcquireAll reads acquire_all.lua's reply for n keys: each key's
// acquire.lua reply, in order, and busy -1 when it took them all; nil and
// the index of a key another owner holds when it took none.
func ParseAcquireAll(reply any, n int) (each []any, busy int, err error) {
	r, ok := reply.([]any)
	if ok && len(r) == 3 && r[0] == int64(0) {
		if i, ok := r[1].(int64); ok && i >= 1 && int(i) <= n {
			return nil, int(i) - 1, nil
		}
	}
	if ok && len(r) == n+1 && r[0] == int64(1) {
		return r[1:], -1, nil
	}
	return nil, -1, fmt.Errorf("mutex: unexpected reply from the acquire_all script: %v", reply)
}
