package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1 "github.com/stencil-operator/stencil/api/cache/v1"
	flightsv1 "github.com/stencil-operator/stencil/api/flights/v1"
	operatorv1 "github.com/stencil-operator/stencil/api/operator/v1"
	samplecontrollerv1alpha1 "github.com/stencil-operator/stencil/api/samplecontroller/v1alpha1"
	"github.com/stencil-operator/stencil/api/v1alpha1"
	webappv1 "github.com/stencil-operator/stencil/api/webapp/v1"
	shipped "github.com/stencil-operator/stencil/internal/testing/samples"
	"github.com/stencil-operator/stencil/render"
)

// TestStatusTemplates runs each seed kind's _status.yaml over live state.
func TestStatusTemplates(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ns"}
	deployment := func(name string, replicas, available, ready, updated int64) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"replicas": replicas},
			"status":   map[string]any{"availableReplicas": available, "readyReplicas": ready, "updatedReplicas": updated},
		}
	}
	pod := func(name string) map[string]any { return map[string]any{"metadata": map[string]any{"name": name}} }
	tests := []struct {
		name string
		cr   v1alpha1.Object
		live render.LiveState
		want string
	}{
		{"Memcached lists its pods", &cachev1.Memcached{ObjectMeta: meta},
			render.LiveState{Observed: map[string][]map[string]any{"Pod": {pod("x-a"), pod("x-b")}}}, `{"nodes":["x-a","x-b"]}`},
		{"Memcached without pods", &cachev1.Memcached{ObjectMeta: meta}, render.LiveState{}, `{"nodes":null}`},
		{"MyWeb completed", &operatorv1.MyWeb{ObjectMeta: meta},
			render.LiveState{Owned: map[string]any{"Deployment/x": deployment("x", 1, 1, 1, 1)}}, `{"completed":true}`},
		{"MyWeb not yet available", &operatorv1.MyWeb{ObjectMeta: meta},
			render.LiveState{Owned: map[string]any{"Deployment/x": deployment("x", 1, 0, 0, 1)}}, `{"completed":false}`},
		{"MyWeb before its deployment exists", &operatorv1.MyWeb{ObjectMeta: meta}, render.LiveState{}, `{"completed":false}`},
		{"Foo available replicas", &samplecontrollerv1alpha1.Foo{ObjectMeta: meta, Spec: samplecontrollerv1alpha1.FooSpec{DeploymentName: "d"}},
			render.LiveState{Owned: map[string]any{"Deployment/d": deployment("d", 3, 2, 2, 3)}}, `{"availableReplicas":2}`},
		{"FlightTicket booking", &flightsv1.FlightTicket{ObjectMeta: meta},
			render.LiveState{Owned: map[string]any{"ConfigMap/x-booking": map[string]any{}}}, `{"booking":"x-booking"}`},
		{"FlightTicket not booked yet", &flightsv1.FlightTicket{ObjectMeta: meta}, render.LiveState{}, `{"booking":""}`},
		{"Guestbook ready replicas", &webappv1.Guestbook{ObjectMeta: meta},
			render.LiveState{Owned: map[string]any{"Deployment/x": deployment("x", 2, 2, 1, 2)}}, `{"readyReplicas":1}`},
	}
	byKind := map[string]*render.Kind{}
	for _, def := range shipped.Definitions() {
		k, err := render.Load(def)
		if err != nil {
			t.Fatal(err)
		}
		byKind[def.GroupVersionKind.Kind] = k
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind := byKind[strings.SplitN(tt.name, " ", 2)[0]]
			got, err := kind.RenderStatus(tt.cr, tt.live)
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(got)
			if string(js) != tt.want {
				t.Errorf("status = %s, want %s", js, tt.want)
			}
		})
	}
}
