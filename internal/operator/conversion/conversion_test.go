package conversion_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/stencil-operator/stencil/api/v1alpha1"
	"github.com/stencil-operator/stencil/internal/dev/localcluster"
	"github.com/stencil-operator/stencil/internal/operator/conversion"
	"github.com/stencil-operator/stencil/internal/testing/testutil"
	"github.com/stencil-operator/stencil/render"
	"github.com/stencil-operator/stencil/templates"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	os.Exit(localcluster.RunTests(m, localcluster.Options{}, &cluster))
}

const crdName = "memcacheds.cache.example.com"

func memcached(t *testing.T) *render.Kind {
	t.Helper()
	for _, def := range templates.Kinds {
		if def.GroupVersionKind.Kind == "Memcached" {
			k, err := render.Load(render.Definition(def))
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
	}
	t.Fatal("no Memcached kind")
	return nil
}

func handler(t *testing.T) *conversion.Handler {
	t.Helper()
	k := memcached(t)
	return &conversion.Handler{Kind: func(gk schema.GroupKind) *render.Kind {
		if gk == k.GroupVersionKind().GroupKind() {
			return k
		}
		return nil
	}, Log: logr.Discard()}
}

func raw(t *testing.T, obj string) runtime.RawExtension {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// TestHandler: every object of a review is converted; one that does not
// convert fails the review with a message naming it.
func TestHandler(t *testing.T) {
	h := handler(t)
	tests := []struct {
		name    string
		objects []string
		to      string
		want    []string // converted specs, as JSON
		fails   string
	}{
		{"two objects", []string{"apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {size: 1}", "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: b, namespace: ns}\nspec: {size: 2, autoscaled: true}"}, "cache.example.com/v1",
			[]string{`{"size":1}`, `{"autoscaling":{"enabled":true},"size":2}`}, ""},
		{"to the spoke", []string{"apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {size: 4}"}, "cache.example.com/v1alpha1", []string{`{"size":4}`}, ""},
		{"another kind", []string{"apiVersion: other.example.com/v1\nkind: Other\nmetadata: {name: a, namespace: ns}\nspec: {}"}, "other.example.com/v2", nil, "stencil: converting Other ns/a: stencil has no kind Other.other.example.com"},
		{"a version the kind has not", []string{"apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {size: 1}"}, "cache.example.com/v2", nil, "stencil: Memcached ns/a: Memcached has no version v2"},
		{"a template that fails", []string{"apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {}"}, "cache.example.com/v1", nil, "stencil: Memcached ns/a: converting Memcached from v1alpha1 to v1: _from-v1alpha1.yaml:"},
		// In a list, one object that fails is a placeholder: the others,
		// other tenants' perhaps, are listed.
		{"a template that fails in a list", []string{"apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {}", "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: b, namespace: other}\nspec: {size: 2}"}, "cache.example.com/v1",
			[]string{`null`, `{"size":2}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: tt.to}
			for _, o := range tt.objects {
				req.Objects = append(req.Objects, raw(t, o))
			}
			resp := h.Convert(t.Context(), req)
			if resp.UID != "u" {
				t.Errorf("UID %q", resp.UID)
			}
			if tt.fails != "" {
				if resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, tt.fails) || len(resp.ConvertedObjects) != 0 {
					t.Errorf("result %+v, want a failure saying %q", resp.Result, tt.fails)
				}
				return
			}
			if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != len(tt.want) {
				t.Fatalf("result %+v with %d objects", resp.Result, len(resp.ConvertedObjects))
			}
			for i, o := range resp.ConvertedObjects {
				u := map[string]any{}
				if err := json.Unmarshal(o.Raw, &u); err != nil {
					t.Fatal(err)
				}
				spec, _ := json.Marshal(u["spec"])
				if string(spec) != tt.want[i] || u["apiVersion"] != tt.to {
					t.Errorf("object %d: %s %s, want %s %s", i, u["apiVersion"], spec, tt.to, tt.want[i])
				}
				ann, _, _ := unstructured.NestedString(u, "metadata", "annotations", v1alpha1.AnnotationConversionFailed)
				if placeholder := tt.want[i] == "null"; placeholder != strings.Contains(ann, "_from-v1alpha1.yaml") {
					t.Errorf("object %d: annotation %s %q; a placeholder: %v", i, v1alpha1.AnnotationConversionFailed, ann, placeholder)
				}
			}
		})
	}
}

func adminClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// installCRD creates the Memcached CRD of file: as `stencil manifests`
// writes it (conversions sent to stencil's Service), or as released.
func installCRD(t *testing.T, c client.Client, file string) {
	t.Helper()
	crd := readCRD(t, file)
	if err := c.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), crd)
		testutil.Eventually(t, time.Minute, "the CRD is gone", func() error {
			if err := c.Get(context.Background(), types.NamespacedName{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
	})
	testutil.Eventually(t, time.Minute, "the CRD is established", func() error {
		_, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: "cache.example.com", Kind: "Memcached"})
		return err
	})
}

// serveWebhook runs the webhook as a local run of stencil does
// (--webhook-url) until the test ends, and points the CRD at it.
// TestHandlerReadsAPlaceholder: the API server decodes each stored object
// of a list through the webhook, one review each. One that does not
// convert from the storage version is read as a placeholder, so that the
// list of every namespace still lists; converting to the storage version
// (a write) still fails.
func TestHandlerReadsAPlaceholder(t *testing.T) {
	h := handler(t)
	h.Storage = func(schema.GroupKind) string { return "v1" }
	read := &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: "cache.example.com/v1alpha1",
		Objects: []runtime.RawExtension{raw(t, "apiVersion: cache.example.com/v1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {}")}}
	resp := h.Convert(t.Context(), read)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("a read that does not convert: %+v", resp.Result)
	}
	u := map[string]any{}
	if err := json.Unmarshal(resp.ConvertedObjects[0].Raw, &u); err != nil {
		t.Fatal(err)
	}
	why, _, _ := unstructured.NestedString(u, "metadata", "annotations", v1alpha1.AnnotationConversionFailed)
	if _, hasSpec := u["spec"]; hasSpec || !strings.Contains(why, "_to-v1alpha1.yaml") || u["apiVersion"] != "cache.example.com/v1alpha1" {
		t.Errorf("the placeholder: %v", u)
	}
	write := &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: "cache.example.com/v1",
		Objects: []runtime.RawExtension{raw(t, "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: a, namespace: ns}\nspec: {}")}}
	if resp := h.Convert(t.Context(), write); resp.Result.Status != metav1.StatusFailure {
		t.Errorf("a write that does not convert: %+v, want a failure", resp.Result)
	}
	// A placeholder written back is refused, whatever its version.
	back := &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: "cache.example.com/v1", Objects: resp.ConvertedObjects}
	if resp := h.Convert(t.Context(), back); resp.Result.Status != metav1.StatusFailure || !strings.Contains(resp.Result.Message, "placeholder") {
		t.Errorf("a placeholder written back: %+v, want a failure", resp.Result)
	}
}

func serveWebhook(t *testing.T, c client.Client) (url string, certs *conversion.Certs) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	_ = l.Close()
	url = fmt.Sprintf("https://127.0.0.1:%d%s", addr.Port, conversion.Path)
	certs = &conversion.Certs{Hosts: []string{"127.0.0.1"}, Client: c, Inject: conversion.CRDs{Client: c, Names: []string{crdName}, URL: url}.Inject, Log: logr.Discard()}
	if err := certs.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: addr.Port, TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}})
	h := handler(t)
	h.Key = func() []byte { return testKey }
	schemas := &conversion.Schemas{Client: c, Names: []string{crdName}, Log: logr.Discard()}
	h.Schema, h.Storage = schemas.For, schemas.Storage
	server.Register(conversion.Path, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the webhook server: %v", err)
		}
	})
	return url, certs
}

// testKey signs the kept fields of the test's webhook.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestForgedKeptFields: a client that writes the kept fields' annotation
// itself stores nothing through it: not a value the storage version's
// schema forbids, not a status. The conversion goes on without it.
func TestForgedKeptFields(t *testing.T) {
	c := adminClient(t)
	installCRD(t, c, "../../../config/crd/bases/cache.example.com_memcacheds.yaml")
	serveWebhook(t, c)
	forged := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "forged", "namespace": "default", "annotations": map[string]any{
			// As an older stencil wrote them, unsigned (the unit tests
			// try the new form unsigned and wrongly signed).
			render.FieldsOfAnnotation + "v1": `[{"path":["spec","size"],"value":100000,"changed":true,"back":3},{"path":["status","phase"],"value":"Forged"}]`,
		}},
		"spec": map[string]any{"size": int64(3)}}}
	testutil.Eventually(t, 30*time.Second, "a v1alpha1 create goes through the webhook", func() error {
		return c.Create(t.Context(), forged)
	})
	t.Cleanup(func() { _ = c.Delete(context.Background(), forged) })
	hub := &unstructured.Unstructured{}
	hub.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "Memcached"})
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "forged"}, hub); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(hub.Object, "spec", "size"); r != 3 {
		t.Errorf("v1 size %d, want 3: the forged kept field was restored past the schema's maximum of 100", r)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(hub.Object, "status", "phase"); found {
		t.Error("v1 holds the forged status")
	}
	if _, found := hub.GetAnnotations()[render.FieldsOfAnnotation+"v1"]; found {
		t.Error("the forged annotation is stored")
	}

	// Conversions go on as before.
	hub.Object["spec"] = map[string]any{"size": int64(4), "driftPolicy": "Report"}
	if err := c.Update(t.Context(), hub); err != nil {
		t.Fatal(err)
	}
	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(forged.GroupVersionKind())
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "forged"}, old); err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(old.Object, "spec", "size"); size != 4 {
		t.Errorf("v1alpha1 size %d, want 4", size)
	}
}

// TestAPIServerCallsTheWebhook: run locally (--webhook-url), stencil points
// the CRD at its webhook with a certificate it made; the API server then
// converts through it both ways.
func TestAPIServerCallsTheWebhook(t *testing.T) {
	c := adminClient(t)
	installCRD(t, c, "../../../config/crd/bases/cache.example.com_memcacheds.yaml")
	url, certs := serveWebhook(t, c)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	cfg := crd.Spec.Conversion.Webhook.ClientConfig
	if crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || cfg.URL == nil || *cfg.URL != url || cfg.Service != nil || string(cfg.CABundle) != string(certs.Bundle()) {
		t.Fatalf("the CRD's conversion: %+v", crd.Spec.Conversion)
	}
	old := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": "m", "namespace": "default"}, "spec": map[string]any{"size": int64(2), "autoscaled": true}}}
	testutil.Eventually(t, 30*time.Second, "a v1alpha1 create goes through the webhook", func() error {
		return c.Create(t.Context(), old)
	})
	hub := &unstructured.Unstructured{}
	hub.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "Memcached"})
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: "m"}, hub); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(hub.Object, "spec", "size"); r != 2 {
		t.Errorf("v1 size %d, want 2", r)
	}
	if on, _, _ := unstructured.NestedBool(hub.Object, "spec", "autoscaling", "enabled"); !on {
		t.Error("v1 autoscaling.enabled is not true")
	}
	if err := c.Delete(t.Context(), hub); err != nil {
		t.Fatal(err)
	}
}

// TestCertificateInSecret: in a cluster, the first replica makes the
// certificate, keeps it in a Secret and writes its CA into the CRD (whose
// Service it leaves as it is); another replica serves the same; one about
// to expire is renewed, the CRD holding the old CA beside the new until it
// expires.
func TestCertificateInSecret(t *testing.T) {
	c := adminClient(t)
	installCRD(t, c, "../../../config/crd/bases/cache.example.com_memcacheds.yaml")
	secret := types.NamespacedName{Namespace: "default", Name: "stencil-webhook-cert"}
	crds := conversion.CRDs{Client: c, Names: []string{crdName}}
	hosts, err := crds.ServiceHosts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"stencil-webhook.stencil-system.svc", "stencil-webhook.stencil-system.svc.cluster.local"}; strings.Join(hosts, ",") != strings.Join(want, ",") {
		t.Errorf("hosts %v, want %v", hosts, want)
	}
	replica := func() *conversion.Certs {
		return &conversion.Certs{Hosts: hosts, Secret: &secret, Client: c, Inject: crds.Inject, Log: logr.Discard()}
	}
	a, b := replica(), replica()
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	ca, cb := served(t, a), served(t, b)
	if !ca.Equal(cb) {
		t.Error("two replicas serve different certificates")
	}
	signing := a.Key()
	if len(signing) != 32 || string(b.Key()) != string(signing) {
		t.Fatalf("the replicas' signing keys: %d and %d bytes, equal: %v; want one key of 32", len(signing), len(b.Key()), string(b.Key()) == string(signing))
	}
	if err := ca.VerifyHostname(hosts[0]); err != nil {
		t.Error(err)
	}
	bundle := crdBundle(t, c)
	if string(bundle) != string(a.Bundle()) {
		t.Error("the CRD does not hold the CA bundle")
	}
	verify(t, ca, bundle, hosts[0])

	// About to expire: renewed, the old CA kept beside the new one.
	crt, key, err := cert.GenerateSelfSignedCertKeyWithOptions(cert.SelfSignedCertKeyOptions{Host: hosts[0], MaxAge: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	old := &corev1.Secret{}
	if err := c.Get(t.Context(), secret, old); err != nil {
		t.Fatal(err)
	}
	old.Data[corev1.TLSCertKey], old.Data[corev1.TLSPrivateKeyKey] = crt, key
	if err := c.Update(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	renewed := served(t, b)
	if renewed.Equal(cb) || time.Until(renewed.NotAfter) < 300*24*time.Hour {
		t.Errorf("not renewed: valid until %s", renewed.NotAfter)
	}
	bundle = crdBundle(t, c)
	verify(t, renewed, bundle, hosts[0])
	verify(t, ca, bundle, hosts[0]) // a replica that has not looked again yet
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !served(t, a).Equal(renewed) {
		t.Error("the other replica does not pick up the renewed certificate")
	}
	if string(a.Key()) != string(signing) || string(b.Key()) != string(signing) {
		t.Error("the signing key changed with the certificate: kept fields signed before would be lost")
	}
	// The Secret deleted: a new CA, and the CRD still trusts the old one,
	// which a replica that has not looked again still serves.
	if err := c.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if served(t, a).Equal(renewed) {
		t.Error("no new certificate after the Secret was deleted")
	}
	bundle = crdBundle(t, c)
	verify(t, served(t, a), bundle, hosts[0])
	verify(t, served(t, b), bundle, hosts[0])
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if svc := crd.Spec.Conversion.Webhook.ClientConfig.Service; svc == nil || svc.Name != "stencil-webhook" || crd.Spec.Conversion.Webhook.ClientConfig.URL != nil {
		t.Errorf("the CRD's Service changed: %+v", crd.Spec.Conversion.Webhook.ClientConfig)
	}
}

func served(t *testing.T, c *conversion.Certs) *x509.Certificate {
	t.Helper()
	pair, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func crdBundle(t *testing.T, c client.Client) []byte {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Conversion.Webhook.ClientConfig.CABundle
}

func verify(t *testing.T, leaf *x509.Certificate, bundle []byte, host string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("the CA bundle holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
		t.Errorf("the CRD's CA bundle does not verify the served certificate: %v", err)
	}
}

// TestMigratesStoredResources: resources stored by the released CRD (v1alpha1
// only) are rewritten at v1 once the new CRD makes v1 the storage version,
// and status.storedVersions shrinks to [v1]; a migration stopped halfway
// (a restart) goes on where it stopped: what it rewrote is not written
// again.
func TestMigratesStoredResources(t *testing.T) {
	c := adminClient(t)
	installCRD(t, c, "../../../config/crd/released/cache.example.com_memcacheds.yaml")
	for i := range 3 {
		old := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
			"metadata": map[string]any{"name": fmt.Sprintf("m%d", i), "namespace": "default"}, "spec": map[string]any{"size": int64(i + 1)}}}
		if err := c.Create(t.Context(), old); err != nil {
			t.Fatal(err)
		}
	}
	upgradeCRD(t, c)
	serveWebhook(t, c)
	if got := storedVersions(t, c); strings.Join(got, ",") != "v1alpha1,v1" {
		t.Fatalf("storedVersions %v before the migration, want [v1alpha1 v1]", got)
	}
	versions := func() map[string]string {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "MemcachedList"})
		testutil.Eventually(t, 30*time.Second, "v1 lists through the webhook", func() error { return c.List(t.Context(), list) })
		out := map[string]string{}
		for _, o := range list.Items {
			out[o.GetName()] = o.GetResourceVersion()
			if r, _, _ := unstructured.NestedInt64(o.Object, "spec", "size"); r == 0 {
				t.Errorf("%s: no size at v1", o.GetName())
			}
		}
		return out
	}
	before := versions()
	m := &conversion.Migrator{Client: c, CRDs: []string{crdName}, QPS: 100, Log: logr.Discard()}
	// Stopped after one rewrite, as a restart would stop it.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := m.Migrate(ctx, crdName, &stopAfter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(), n: 1, cancel: cancel}); err == nil {
		t.Fatal("a migration stopped halfway: no error")
	}
	if got := storedVersions(t, c); strings.Join(got, ",") != "v1alpha1,v1" {
		t.Errorf("storedVersions %v after a migration stopped halfway, want [v1alpha1 v1]", got)
	}
	mid := versions()
	var once []string
	for name, rv := range before {
		if mid[name] != rv {
			once = append(once, name)
		}
	}
	if len(once) != 1 {
		t.Fatalf("rewritten before the stop: %v, want one", once)
	}
	// Started again: the rest is rewritten, the one done before is not.
	if err := m.Migrate(t.Context(), crdName, flowcontrol.NewFakeAlwaysRateLimiter()); err != nil {
		t.Fatal(err)
	}
	if got := storedVersions(t, c); strings.Join(got, ",") != "v1" {
		t.Errorf("storedVersions %v after the migration, want [v1]", got)
	}
	after := versions()
	for name, rv := range mid {
		if name == once[0] && after[name] != rv {
			t.Errorf("%s, rewritten before the stop, was written again", name)
		}
		if name != once[0] && after[name] == rv {
			t.Errorf("%s was not rewritten", name)
		}
	}
	for _, o := range []string{"m0", "m1", "m2"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "Memcached"})
		u.SetNamespace("default")
		u.SetName(o)
		_ = c.Delete(t.Context(), u)
	}
}

// stopAfter lets n rewrites through, then cancels the migration.
type stopAfter struct {
	flowcontrol.RateLimiter
	n      int
	cancel context.CancelFunc
}

func (s *stopAfter) Wait(ctx context.Context) error {
	if s.n == 0 {
		s.cancel()
		return context.Canceled
	}
	s.n--
	return nil
}

// TestMigrationGoesOnPastARefusedResource: a resource whose rewrite the
// API server refuses (here an admission policy) is passed and named; the
// others are rewritten; storedVersions keeps the older version until the
// refused one is rewritten too.
func TestMigrationGoesOnPastARefusedResource(t *testing.T) {
	c := adminClient(t)
	installCRD(t, c, "../../../config/crd/released/cache.example.com_memcacheds.yaml")
	// Listed in name order: the refused one first.
	for _, name := range []string{"a-refused", "m-a", "m-b"} {
		old := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": int64(1)}}}
		if err := c.Create(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), old) })
	}
	upgradeCRD(t, c)
	serveWebhook(t, c)
	refuse(t, c, "a-refused")

	m := &conversion.Migrator{Client: c, CRDs: []string{crdName}, QPS: 100, Log: logr.Discard()}
	err := m.Migrate(t.Context(), crdName, flowcontrol.NewFakeAlwaysRateLimiter())
	if err == nil || !strings.Contains(err.Error(), "default/a-refused") || !strings.Contains(err.Error(), "refused 1") {
		t.Fatalf("Migrate: %v, want an error naming the one refused resource", err)
	}
	if got := storedVersions(t, c); strings.Join(got, ",") != "v1alpha1,v1" {
		t.Errorf("storedVersions %v with a resource not rewritten, want [v1alpha1 v1]", got)
	}
	// The others were rewritten: a second pass writes them no more.
	rvs := func() map[string]string {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "MemcachedList"})
		if err := c.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range list.Items {
			out[o.GetName()] = o.GetResourceVersion()
		}
		return out
	}
	before := rvs()
	if err := c.Delete(t.Context(), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "refuse-a-refused"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the migration of every resource", func() error {
		return m.Migrate(t.Context(), crdName, flowcontrol.NewFakeAlwaysRateLimiter())
	})
	if got := storedVersions(t, c); strings.Join(got, ",") != "v1" {
		t.Errorf("storedVersions %v after the migration, want [v1]", got)
	}
	after := rvs()
	for _, name := range []string{"m-a", "m-b"} {
		if after[name] != before[name] {
			t.Errorf("%s was rewritten again: the first pass passed it", name)
		}
	}
}

// upgradeCRD puts the new build's Memcached CRD over the released one.
// The API server's CRD controllers write its status meanwhile: it is read
// again on a conflict.
func upgradeCRD(t *testing.T, c client.Client) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := readCRD(t, "../../../config/crd/bases/cache.example.com_memcacheds.yaml")
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(t.Context(), types.NamespacedName{Name: crdName}, live); err != nil {
			return err
		}
		crd.ResourceVersion = live.ResourceVersion
		return c.Update(t.Context(), crd)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// refuse has an admission policy refuse every update of the Memcached
// name, until the test ends.
func refuse(t *testing.T, c client.Client, name string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cache.example.com"}, APIVersions: []string{"*"}, Resources: []string{"memcacheds"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "refused by the test"}},
		},
	}
	deny := admissionregistrationv1.Deny
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	testutil.Eventually(t, time.Minute, "the policy refuses an update of "+name, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "Memcached"})
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: name}, u); err != nil {
			return err
		}
		if err := c.Update(t.Context(), u, client.DryRunAll); err == nil {
			return errors.New("an update went through")
		}
		return nil
	})
}

func storedVersions(t *testing.T, c client.Client) []string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), types.NamespacedName{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}
