package mutex_test

import (
	"regexp"
	"strconv"
)

var evalRe = regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`)

// evalCalls sums EVAL and EVALSHA calls in INFO commandstats output.
func evalCalls(info string) int {
	n := 0
	for _, m := range evalRe.FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}
