// Package bench compares redfence with its peers side by side (issue 10). It
// is a module of its own so that peers never enter redfence's go.mod.
package bench
