package reconciler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMissingFields(t *testing.T) {
	record := func(fields ...string) []string {
		var entries []metav1.ManagedFieldsEntry
		for _, f := range fields {
			entries = append(entries, metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(f)})
		}
		return ownedRecord(entries, FieldManager)
	}
	both := `{"f:data":{"f:a":{},"f:b":{}}}`
	tests := []struct {
		name       string
		base, live []string
		want       []string
	}{
		{"the same record", record(both), record(both), nil},
		{"the same fields, written in another order", record(both), record(`{"f:data":{"f:b":{},"f:a":{}}}`), nil},
		{"a field taken", record(both), record(`{"f:data":{"f:a":{}}}`), []string{".data.b"}},
		{"a field gained is no drift", record(`{"f:data":{"f:a":{}}}`), record(both), nil},
		{"every field taken", record(both), nil, []string{".data.a", ".data.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			missing, err := missingFields(tt.base, tt.live)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for p := range missing.Leaves().All() {
				got = append(got, p.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("missing %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("missing %q, want %q", got, tt.want)
				}
			}
		})
	}
}

func TestOwnedRecordSkipsOtherEntries(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:a":{}}`)},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:b":{}}`)},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:c":{}}`)},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:d":{}}`)},
	}
	got := ownedRecord(entries, FieldManager)
	if len(got) != 1 || got[0] != `{"f:a":{}}` {
		t.Errorf("record %q, want only our Apply entry on the object", got)
	}
}
