package reconciler

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/stencil-operator/stencil/api/v1alpha1"
)

// masked replaces the values of Secret data in drift reports.
const masked = "(masked)"

// report describes the drift of d: for each field our manager lost, the
// desired and live values, who holds it now and since when, and a short
// unified diff. It reads the full live object, once per drifted object.
func (a *applier) report(ctx context.Context, d *unstructured.Unstructured, missing *fieldpath.Set) (v1alpha1.ObjectDrift, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.GroupVersionKind())
	if err := a.reader.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return v1alpha1.ObjectDrift{}, fmt.Errorf("reading drifted %s %s: %w", d.GetKind(), client.ObjectKeyFromObject(d), err)
	}
	report := v1alpha1.ObjectDrift{
		APIVersion: d.GetAPIVersion(),
		Kind:       d.GetKind(),
		Namespace:  d.GetNamespace(),
		Name:       d.GetName(),
	}
	secret := d.GetKind() == "Secret" && d.GroupVersionKind().Group == ""
	for _, path := range firstPaths(missing.Leaves(), v1alpha1.MaxDriftFields) {
		f := v1alpha1.FieldDrift{Path: cut(path.String(), v1alpha1.MaxPathBytes)}
		f.Desired, _ = valueAt(d.Object, path)
		f.Live, _ = valueAt(live.Object, path)
		if secret {
			f.Desired, f.Live = mask(f.Desired), mask(f.Live)
		}
		f.Desired, f.Live = cut(f.Desired, v1alpha1.MaxValueBytes), cut(f.Live, v1alpha1.MaxValueBytes)
		f.Manager, f.Time = holder(live.GetManagedFields(), path, FieldManager)
		report.Fields = append(report.Fields, f)
	}
	report.Diff = fieldDiff(report)
	return report, nil
}

// firstPaths are at most n paths of s. (fieldpath.Set.All ignores a break:
// the range loop would panic.)
func firstPaths(s *fieldpath.Set, n int) []fieldpath.Path {
	var out []fieldpath.Path
	s.Iterate(func(p fieldpath.Path) {
		if len(out) < n {
			out = append(out, p.Copy())
		}
	})
	return out
}

func mask(v string) string {
	if v == "" {
		return ""
	}
	return masked
}

// fieldDiff is a unified diff of the drifted fields (their values already
// cut to MaxValueBytes), desired against live, cut to MaxDiffBytes.
func fieldDiff(o v1alpha1.ObjectDrift) string {
	var desired, live []string
	for _, f := range o.Fields {
		desired = append(desired, f.Path+": "+orAbsent(f.Desired)+"\n")
		live = append(live, f.Path+": "+orAbsent(f.Live)+"\n")
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: desired, B: live,
		FromFile: "desired/" + o.Kind + "/" + o.Name,
		ToFile:   "live/" + o.Kind + "/" + o.Name,
		Context:  0,
	})
	if err != nil {
		return ""
	}
	return cut(strings.TrimSuffix(diff, "\n"), v1alpha1.MaxDiffBytes)
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}
