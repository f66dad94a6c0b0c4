package kindtest_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	testv1alpha1 "github.com/stencil-operator/stencil/internal/testing/testkind/v1alpha1"
	"github.com/stencil-operator/stencil/render/kindtest"
)

// messageDefault is a CRD's default for the Widget's spec.message, set as
// the API server sets it: where the document lacks the field.
type messageDefault struct{ err error }

func (d messageDefault) Default(o *unstructured.Unstructured) error {
	if d.err != nil {
		return d.err
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "message"); !found {
		return unstructured.SetNestedField(o.Object, "defaulted", "spec", "message")
	}
	return nil
}

// TestDecode: a custom resource is read strictly, then defaulted on the
// document as written (Widget's message has no omitempty: decoded first, an
// absent message would be "" and escape its default).
func TestDecode(t *testing.T) {
	tests := []struct {
		name, spec string
		// defaulter defaults the document; nil for none.
		defaulter kindtest.Defaulter
		// want is the decoded spec.message, or wantErr in the error.
		want, wantErr string
	}{
		{"an absent field is defaulted", "{replicas: 1}", messageDefault{}, "defaulted", ""},
		{"a given field stays", "{message: mine}", messageDefault{}, "mine", ""},
		{"an empty string is given, not absent", `{message: ""}`, messageDefault{}, "", ""},
		{"no defaulter: as written", "{replicas: 1}", nil, "", ""},
		{"an unknown field is refused before defaulting", "{mesage: x}", messageDefault{}, "", `unknown field "mesage"`},
		{"a defaulter's error", "{}", messageDefault{err: errors.New("no schema")}, "", "defaulting: no schema"},
	}
	k := widget(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "apiVersion: test.stencil.dev/v1alpha1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: " + tt.spec + "\n"
			obj, err := kindtest.Decode(k, []byte(doc), tt.defaulter)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := obj.(*testv1alpha1.Widget).Spec.Message; got != tt.want {
				t.Errorf("spec.message %q, want %q", got, tt.want)
			}
		})
	}
}
