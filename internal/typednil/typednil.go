// Package typednil tells an interface holding a typed nil (a nil
// *pgxpool.Pool in a Beginner, a nil *sdktrace.TracerProvider in a
// trace.TracerProvider) from a usable value: its methods would panic on
// first use, so constructors turn it into their ErrInvalid, or their
// default, instead.
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil pointer, func, map, chan or
// slice.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
