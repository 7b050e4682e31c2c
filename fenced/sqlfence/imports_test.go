package sqlfence_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportsNoDriver: a program that imports sqlfence compiles no database
// driver, pgx included, fence compiles nothing outside the standard
// library but redfence's internal packages, and no fence compiles the
// Locker: what a user compiles stays small.
func TestImportsNoDriver(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.Fields(string(out))
	}
	for _, dep := range deps("github.com/redfence/redfence/fenced/sqlfence") {
		for _, driver := range []string{"github.com/jackc/pgx", "github.com/go-sql-driver/", "modernc.org/"} {
			assert.False(t, strings.HasPrefix(dep, driver), "sqlfence depends on %s", dep)
		}
	}
	// What a user of one store compiles holds no other store's driver.
	for pkg, drivers := range map[string][]string{
		"github.com/redfence/redfence/mutex":            {"github.com/jackc/pgx", "github.com/go-sql-driver/", "modernc.org/"},
		"github.com/redfence/redfence/fenced":           {"github.com/go-sql-driver/", "modernc.org/"},
		"github.com/redfence/redfence/redis/redisfence": {"github.com/jackc/pgx", "github.com/go-sql-driver/", "modernc.org/"},
	} {
		for _, dep := range deps(pkg) {
			for _, driver := range drivers {
				assert.False(t, strings.HasPrefix(dep, driver), "%s depends on %s", pkg, dep)
			}
		}
	}
	// -deps is transitive: a module an internal package pulled in is listed too.
	for _, dep := range deps("github.com/redfence/redfence/fenced/fence") {
		first, _, _ := strings.Cut(dep, "/")
		assert.True(t, !strings.Contains(first, ".") || strings.HasPrefix(dep, "github.com/redfence/redfence/fenced/fence") ||
			strings.HasPrefix(dep, "github.com/redfence/redfence/internal/"), "fence depends on %s", dep)
	}
	// The fences share the Locker's ErrInvalid through internal/invalid, not
	// by importing the Locker.
	for _, pkg := range []string{"fenced", "fenced/fence", "fenced/sqlfence", "redis/redisfence"} {
		for _, dep := range deps("github.com/redfence/redfence/" + pkg) {
			assert.False(t, strings.HasPrefix(dep, "github.com/redfence/redfence/mutex"), "%s depends on %s", pkg, dep)
		}
	}
}
