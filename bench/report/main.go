// Command report summarises interleaved rounds of `go test -bench` output
// (rounds separated by lines starting with "### round"): the median of every
// metric over the rounds, and ratios taken inside each round (then their
// median), so that a slow round moves both sides of a ratio together.
//
//	make bench   # runs the rounds and this report
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

type metrics map[string]float64

var lineRe = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

func main() {
	var rounds []map[string]metrics
	var order []string
	seen := map[string]bool{}
	cur := map[string]metrics{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "### round") {
			if len(cur) > 0 {
				rounds = append(rounds, cur)
			}
			cur = map[string]metrics{}
			continue
		}
		m := lineRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], "Benchmark")
		fields := strings.Fields(m[3])
		ms := metrics{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				ms[fields[i+1]] = v
			}
		}
		cur[name] = ms
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		}
	}
	if len(cur) > 0 {
		rounds = append(rounds, cur)
	}
	fmt.Printf("%d rounds; medians\n\n", len(rounds))
	for _, name := range order {
		var units []string
		for _, r := range rounds {
			for u := range r[name] {
				if !slices.Contains(units, u) {
					units = append(units, u)
				}
			}
		}
		slices.Sort(units)
		var parts []string
		for _, u := range units {
			if u == "ns/op" && median(collect(rounds, name, u)) == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s", format(median(collect(rounds, name, u))), u))
		}
		fmt.Printf("%-55s %s\n", name, strings.Join(parts, "  "))
	}

	// Ratios across benchmarks of Uncontended and Fenced, when the rounds
	// have them (make bench-etcd's have neither).
	if hasPrefix(order, "Uncontended/", "Fenced/") {
		crossRatios(rounds)
	}

	// BenchmarkPaired takes its ratio inside the benchmark, over alternating
	// blocks of cycles: the steadiest figure on a noisy host.
	// Its names say the pair: Paired/<mode>/<subject>-vs-<reference>.
	fmt.Printf("\npaired ratios (alternating blocks inside one benchmark; per round, then median)\n\n")
	// So does BenchmarkFencedPaired: FencedPaired/<mode>/<subject>-vs-<reference>.
	for _, name := range order {
		bench, pair, ok := strings.Cut(name, "/")
		if !ok || !strings.HasPrefix(bench, "Paired") && !strings.HasSuffix(bench, "Paired") {
			continue
		}
		if rs := collect(rounds, name, "x-ref"); len(rs) > 0 {
			mode, subs, _ := strings.Cut(pair, "/")
			sub, ref, _ := strings.Cut(subs, "-vs-")
			fmt.Printf("%-40s %.2f × %s   (rounds: %s)\n", bench+"/"+mode+"/"+sub, median(rs), ref, join(rs))
		}
	}

	latency(rounds, order)
	etcdContended(rounds, order)
}

// crossRatios prints the ratios of BenchmarkUncontended's subjects and of
// BenchmarkFenced's, each taken inside a round, and the CPU per cycle.
func crossRatios(rounds []map[string]metrics) {
	fmt.Printf("\nratios (per round, then median)\n\n")
	for _, mode := range []string{"seq", "seq-busy", "parallel"} {
		for _, sub := range []string{"redfence", "redislock", "redsync-1", "redlock-3", "redsync-3", "redlock-5", "redsync-5"} {
			ratio(rounds, fmt.Sprintf("Uncontended/%s/%s", mode, sub), fmt.Sprintf("Uncontended/%s/floor", mode), "ns/op", "× floor")
		}
		ratio(rounds, "Uncontended/"+mode+"/redlock-5", "Uncontended/"+mode+"/redsync-5", "ns/op", "× redsync-5")
		ratio(rounds, "Uncontended/"+mode+"/redlock-3", "Uncontended/"+mode+"/redfence", "ns/op", "× redfence single node")
		ratio(rounds, "Uncontended/"+mode+"/redlock-5", "Uncontended/"+mode+"/redfence", "ns/op", "× redfence single node")
	}
	for _, mode := range []string{"seq", "parallel"} {
		ratio(rounds, "Fenced/"+mode+"/fenced", "Fenced/"+mode+"/plain", "ns/op", "× plain transaction")
	}

	// CPU time per cycle, client and servers together: what bounds a cycle
	// once the client and its servers share the host's CPUs.
	fmt.Printf("\nCPU per cycle, client + servers (per round, then median)\n\n")
	for _, mode := range []string{"seq", "parallel"} {
		ratio(rounds, "Uncontended/"+mode+"/redfence", "Uncontended/"+mode+"/floor", "cpu-ns/op", "× floor CPU")
		ratio(rounds, "Uncontended/"+mode+"/redlock-5", "Uncontended/"+mode+"/redsync-5", "cpu-ns/op", "× redsync-5 CPU")
		ratio(rounds, "Uncontended/"+mode+"/redlock-5", "Uncontended/"+mode+"/redsync-5", "client-cpu-ns/op", "× redsync-5 client CPU")
		ratio(rounds, "Uncontended/"+mode+"/redlock-5", "Uncontended/"+mode+"/redsync-5", "server-cpu-ns/op", "× redsync-5 server CPU")
	}
}

// hasPrefix says whether any name begins with one of prefixes.
func hasPrefix(names []string, prefixes ...string) bool {
	for _, n := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
	}
	return false
}

// etcdContended prints BenchmarkEtcdContended's redfence subjects
// (EtcdContended/g=<g>/redfence-<n>, make bench-etcd) against
// concurrency.Mutex's (…/mutex) in the same round: p99 wait and
// acquisitions per second, per round, then the median.
func etcdContended(rounds []map[string]metrics, order []string) {
	header := false
	for _, name := range order {
		group, sub, ok := strings.Cut(strings.TrimPrefix(name, "EtcdContended/"), "/")
		if !ok || !strings.HasPrefix(name, "EtcdContended/") || !strings.HasPrefix(sub, "redfence") {
			continue
		}
		if !header {
			fmt.Printf("\netcd, one key contended, against concurrency.Mutex (per round, then median)\n\n")
			header = true
		}
		ref := "EtcdContended/" + group + "/mutex"
		ratio(rounds, name, ref, "p99-ms", "× mutex p99")
		ratio(rounds, name, ref, "acq/s", "× mutex acq/s")
	}
}

// latency prints BenchmarkRedlockLatencyPaired
// (RedlockLatencyPaired/<scenario>/<subject>-vs-<reference>): each side's
// cycle times, the physical floor and the subject's ratio to it, failed
// acquisitions (summed over the rounds: any one counts), the ratio to the
// reference and, with a master paused, the subject's p99 over its healthy
// one. Ratios are taken inside each round, then their median.
func latency(rounds []map[string]metrics, order []string) {
	var names []string
	for _, name := range order {
		if strings.HasPrefix(name, "RedlockLatencyPaired/") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Printf("\nRedlock behind network latency (ms, medians of the rounds; floor: two round trips to the\n")
	fmt.Printf("quorum-th fastest master that answers; ping: two PINGs to it through its proxy; failed: summed)\n\n")
	fmt.Printf("%-10s %-34s %15s %15s %6s %7s %6s %7s %6s %12s\n",
		"scenario", "subject vs reference", "p50 / p99", "ref p50 / p99", "floor", "× floor", "ping", "failed", "× ref", "p99×healthy")
	for _, name := range names {
		scenario, pair, _ := strings.Cut(strings.TrimPrefix(name, "RedlockLatencyPaired/"), "/")
		med := func(unit string) string {
			v := collect(rounds, name, unit)
			if len(v) == 0 {
				return "–"
			}
			return ms(median(v))
		}
		total := func(unit string) string {
			var n float64
			for _, v := range collect(rounds, name, unit) {
				n += v
			}
			return strconv.FormatFloat(n, 'f', 0, 64)
		}
		ratio := func(unit string) string {
			v := collect(rounds, name, unit)
			if len(v) == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", median(v))
		}
		fmt.Printf("%-10s %-34s %15s %15s %6s %7s %6s %7s %6s %12s\n", scenario, strings.Replace(pair, "-vs-", " vs ", 1),
			med("p50-ms")+" / "+med("p99-ms"), med("ref-p50-ms")+" / "+med("ref-p99-ms"),
			med("floor-ms"), ratio("x-floor"), med("ping-floor-ms"),
			total("failed")+" / "+total("ref-failed"), ratio("x-ref"), ratio("p99-x-healthy"))
	}
}

// ms formats milliseconds to about three significant figures.
func ms(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func collect(rounds []map[string]metrics, name, unit string) []float64 {
	var out []float64
	for _, r := range rounds {
		if v, ok := r[name][unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

func ratio(rounds []map[string]metrics, num, den, unit, label string) {
	var rs []float64
	for _, r := range rounds {
		a, ok1 := r[num][unit]
		b, ok2 := r[den][unit]
		if ok1 && ok2 && b > 0 {
			rs = append(rs, a/b)
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Printf("%-40s %.2f %s   (rounds: %s)\n", num, median(rs), label, join(rs))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func format(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func join(v []float64) string {
	var p []string
	for _, x := range v {
		p = append(p, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return strings.Join(p, " ")
}
