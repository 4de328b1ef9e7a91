package otelturnframe

import "reflect"

// isNil reports whether v, a Sender or a provider the application hands in,
// is nil: the nil interface, or one holding a nil pointer or func (a nil
// *turnframe.HTTPSender whose constructor's error was ignored, a nil
// *sdktrace.TracerProvider), whose first call would panic.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
