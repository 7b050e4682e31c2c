// Package demo holds what the examples share: where their Redis and
// PostgreSQL come from. A server named by REDIS_URL or DATABASE_URL is
// checked before use, so a demo pointed at nothing says so within seconds;
// without one, the demo brings its own.
package demo
