package difftest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// dump prints v deeply and canonically: pointers followed, nil and empty
// slices alike, map keys sorted, times with their location, and every
// type with a String method (ids, statuses) by it.
func dump(v any) string {
	var b strings.Builder
	dumpValue(&b, reflect.ValueOf(v))
	return b.String()
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	timeType     = reflect.TypeFor[time.Time]()
)

func dumpValue(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("nil")
		return
	}
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if t.IsZero() {
			b.WriteString("0")
			return
		}
		b.WriteString(t.Format(time.RFC3339Nano) + "@" + t.Location().String())
		return
	}
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface && v.Type().Implements(stringerType) && v.CanInterface() {
		b.WriteString(v.Interface().(fmt.Stringer).String())
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("&")
		dumpValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			fmt.Fprintf(b, "%s:", v.Type().Field(i).Name)
			dumpValue(b, v.Field(i))
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "%q", v.Bytes())
			return
		}
		b.WriteString("[")
		for i := range v.Len() {
			dumpValue(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	case reflect.Map:
		var parts []string
		for _, k := range v.MapKeys() {
			var kb strings.Builder
			dumpValue(&kb, k)
			kb.WriteString("=")
			dumpValue(&kb, v.MapIndex(k))
			parts = append(parts, kb.String())
		}
		slices.Sort(parts)
		b.WriteString("map[" + strings.Join(parts, " ") + "]")
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}
