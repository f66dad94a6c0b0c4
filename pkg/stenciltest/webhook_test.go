package stenciltest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/stencil-operator/stencil/pkg/stencil"
	"github.com/stencil-operator/stencil/pkg/stenciltest"
	"github.com/stencil-operator/stencil/templates"
)

// denyLabelled is a project's own validating webhook, served by the
// manager that runs its templates (Setup registers it on
// mgr.GetWebhookServer()): it refuses ConfigMaps labelled
// example.com/deny=yes.
func denyLabelled(mgr manager.Manager) error {
	mgr.GetWebhookServer().Register("/validate-configmaps", &webhook.Admission{Handler: admission.HandlerFunc(
		func(_ context.Context, req admission.Request) admission.Response {
			cm := &corev1.ConfigMap{}
			if err := (admission.NewDecoder(mgr.GetScheme())).Decode(req, cm); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			if cm.Labels["example.com/deny"] == "yes" {
				return admission.Denied("the project's webhook refuses ConfigMaps labelled example.com/deny=yes")
			}
			return admission.Allowed("")
		})})
	return nil
}

// TestAWebhookBesideTheTemplates: a project's own validating webhook runs
// in the manager that runs its template kinds, on the address and with the
// certificate of stencil's webhook flags (--webhook-bind-address,
// --webhook-cert-dir, as cert-manager would provide it): the API server
// calls it, and it refuses what it refuses; the template kind still
// reconciles.
func TestAWebhookBesideTheTemplates(t *testing.T) {
	var flights []stencil.Kind
	for _, k := range templates.Kinds {
		if k.GroupVersionKind.Kind == "FlightTicket" {
			flights = append(flights, k)
		}
	}
	certDir, caBundle := selfSignedCert(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cluster := stenciltest.StartCluster(t)
	cluster.InstallCRDs(t, "../../config/crd/bases")
	cluster.RunOperator(t, stencil.Project{Name: "flights", Kinds: flights, Setup: denyLabelled},
		"--webhook-bind-address="+addr, "--webhook-cert-dir="+certDir)

	cl, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + addr + "/validate-configmaps"
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-labelled"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "deny-labelled.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "example.com/deny", Operator: metav1.LabelSelectorOpExists}}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := cl.Create(t.Context(), config); err != nil {
		t.Fatal(err)
	}
	// The API server calls the webhook once it has read its configuration:
	// a ConfigMap labelled deny=no passes through it, one labelled yes is
	// refused with its message.
	var last error
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "denied-", Namespace: "default", Labels: map[string]string{"example.com/deny": "yes"}}}
		last = cl.Create(ctx, cm)
		if last == nil {
			return false, cl.Delete(ctx, cm) // before the API server knew the webhook
		}
		return strings.Contains(last.Error(), "the project's webhook refuses"), nil
	})
	if err != nil {
		t.Fatalf("a ConfigMap labelled example.com/deny=yes: %v (last: %v)", err, last)
	}
	allowed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Namespace: "default", Labels: map[string]string{"example.com/deny": "no"}}}
	if err := cl.Create(t.Context(), allowed); err != nil {
		t.Errorf("a ConfigMap labelled example.com/deny=no, through the webhook: %v", err)
	}
	// The template kind reconciles beside it.
	ticket := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flights.com/v1", "kind": "FlightTicket",
		"metadata": map[string]any{"name": "trip", "namespace": "default"},
		"spec":     map[string]any{"from": "Mumbai", "to": "Oslo", "number": int64(1)},
	}}
	if err := cl.Create(t.Context(), ticket); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "trip-booking"}, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return cm.Data["summary"] == "1 ticket(s) from Mumbai to Oslo", nil
	})
	if err != nil {
		t.Errorf("the FlightTicket's ConfigMap: %v", err)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key into a
// folder (tls.crt, tls.key, as cert-manager writes them) and returns the
// folder and the certificate as a CA bundle.
func selfSignedCert(t *testing.T) (dir string, caBundle []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, data := range map[string][]byte{
		"tls.crt": crt,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, crt
}
