// Package apicheck holds the checks that keep redfence's public API one
// vocabulary (docs/vocabulary.md): the option table, and one ErrInvalid
// for every package's bad input.
package apicheck
