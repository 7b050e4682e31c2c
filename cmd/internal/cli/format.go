package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/mutex"
)

// stamp prints t, or "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(lockview.TimeLayout)
}

// human prints d to the precision a person reads at that size: 850ms,
// 2.5s, 42s, 3m07s, 5h02m, 3d04h.
func human(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// ownerText is who holds in, as a person reads it: the owner info, else
// the raw owner id (a WithOwner id), else "-".
func ownerText(owner string, info mutex.OwnerInfo) string {
	if s := info.String(); s != "" {
		return s
	}
	if owner != "" {
		return owner
	}
	return "-"
}

// tokenText prints a token, "-" for none.
func tokenText(t int64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatInt(t, 10)
}
