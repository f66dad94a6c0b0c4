package engine

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

// Report describes the drift of d: for each field our manager lost whose
// live value differs from the desired one, the two values, who holds it now
// and since when, and a short unified diff. A field another manager holds
// with the very value the template sets is not drift. It reads the full
// live object, once per drifted object; no Fields means no drift.
func (a *Applier) Report(ctx context.Context, d *unstructured.Unstructured, missing *fieldpath.Set) (v1alpha1.ObjectDrift, error) {
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
	missing.Leaves().Iterate(func(path fieldpath.Path) {
		if len(report.Fields) == v1alpha1.MaxDriftFields {
			return // fieldpath.Set.All ignores a break: its range loop would panic
		}
		f := v1alpha1.FieldDrift{Path: Cut(path.String(), v1alpha1.MaxPathBytes)}
		var inDesired, inLive bool
		f.Desired, inDesired = valueAt(d.Object, path)
		f.Live, inLive = valueAt(live.Object, path)
		if inDesired && inLive && f.Desired == f.Live {
			return
		}
		if secret {
			f.Desired, f.Live = mask(f.Desired), mask(f.Live)
		}
		f.Desired, f.Live = Cut(f.Desired, v1alpha1.MaxValueBytes), Cut(f.Live, v1alpha1.MaxValueBytes)
		f.Manager, f.Time = holder(live.GetManagedFields(), path.Copy(), FieldManager)
		report.Fields = append(report.Fields, f)
	})
	report.Diff = fieldDiff(report)
	return report, nil
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
	return Cut(strings.TrimSuffix(diff, "\n"), v1alpha1.MaxDiffBytes)
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}
