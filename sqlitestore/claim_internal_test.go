package sqlitestore

import (
	"reflect"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// sameRecord stands in for reflect.DeepEqual: it must tell apart two
// records that differ in any one field, whatever field OutboxRecord has.
func TestSameRecordReadsEveryField(t *testing.T) {
	ids := turnframe.NewIDGenerator()
	now := stamp(time.Now())
	rec := turnframe.OutboxRecord{
		OutboxEntry: turnframe.OutboxEntry{
			ID: ids.OutboxID(now), Account: "acme", Turn: ids.TurnID(now), Key: "k1", Destination: "payments",
			Payload: []byte("{}"), OrderKey: "card", Attempts: 1, CreatedAt: now,
		},
		Status: turnframe.OutboxDispatching, DueAt: now, ClaimedBy: "w", ClaimedAt: now,
		LastCode: "c", RemoteRef: "r", UpdatedAt: now, FinishedAt: now, LeaseUntil: now,
	}
	if !sameRecord(rec, rec) {
		t.Fatal("a record differs from itself")
	}
	mutated := rec
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, field := v.Type().Field(i), v.Field(i)
			name := path + f.Name
			if f.Anonymous {
				walk(field, name+".")
				continue
			}
			old := reflect.New(field.Type()).Elem()
			old.Set(field)
			switch {
			case field.Kind() == reflect.String:
				field.SetString(field.String() + "x")
			case field.CanInt():
				field.SetInt(field.Int() + 1)
			case field.CanUint(): // statuses
				field.SetUint(field.Uint() + 1)
			case field.Kind() == reflect.Slice:
				field.Set(reflect.Zero(field.Type())) // nil, not the payload
			case field.Kind() == reflect.Struct: // ids and times: the zero value
				field.Set(reflect.Zero(field.Type()))
			default:
				t.Fatalf("field %s of kind %v: teach this test and sameRecord about it", name, field.Kind())
			}
			if sameRecord(rec, mutated) {
				t.Errorf("sameRecord does not compare field %s", name)
			}
			field.Set(old)
		}
	}
	walk(reflect.ValueOf(&mutated).Elem(), "")
	// An empty payload is not a nil one.
	empty := rec
	empty.Payload = []byte{}
	nilPayload := rec
	nilPayload.Payload = nil
	if sameRecord(empty, nilPayload) {
		t.Error("sameRecord takes a nil payload for an empty one")
	}
}
