package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is who stencil's writes to the CRDs are by.
const FieldManager = "stencil-conversion"

// CRDs writes the conversion webhook into the CRDs of the kinds with
// several versions.
type CRDs struct {
	Client client.Client
	// Names are the CRDs' names.
	Names []string
	// URL, when set, is where the API server reaches this process (a local
	// run): each CRD is pointed at it. Unset, each CRD must already send
	// its conversions to stencil's Service (config/crd's patch does), and
	// only the CA bundle is written.
	URL string
	// Service, when set, is the Service each CRD is pointed at (a Helm
	// release's, in its namespace), with the CA bundle.
	Service *Service
}

// Inject writes bundle (and URL) into every CRD; it writes nothing to a CRD
// that already holds them.
func (c CRDs) Inject(ctx context.Context, bundle []byte) error {
	for _, name := range c.Names {
		if err := c.inject(ctx, name, bundle); err != nil {
			return err
		}
	}
	return nil
}

// inject writes the bundle into the CRD name, beside the CAs the CRD still
// trusts. The write is conditional on the CRD read: when another replica
// wrote it in between, its CA is read and kept too, never overwritten.
func (c CRDs) inject(ctx context.Context, name string, bundle []byte) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error { return c.injectOnce(ctx, name, bundle) })
}

func (c CRDs) injectOnce(ctx context.Context, name string, bundle []byte) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		return fmt.Errorf("reading the CRD %s to write its conversion webhook: %w", name, err)
	}
	conv := crd.Spec.Conversion
	hook := &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{}}
	if conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil {
		hook = conv.Webhook
	}
	cfg := hook.ClientConfig
	if c.URL == "" {
		// Replicas serve from a Secret they read at times: a CA the CRD
		// trusts stays until it expires, so that a replica still serving
		// a certificate it signed is never cut off.
		bundle = append(slices.Clip(bundle), missingFrom(bundle, stillValid(cfg.CABundle, time.Now()))...)
	}
	if c.URL == "" && c.Service == nil && (conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || cfg.Service == nil) {
		return fmt.Errorf("the CRD %s does not send its conversions to stencil's webhook Service (spec.conversion: strategy Webhook, clientConfig.service): install it from config/crd, whose patch sets them, or run stencil with --webhook-url", name)
	}
	if string(cfg.CABundle) == string(bundle) && c.pointsAt(cfg) && conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		return nil
	}
	clientConfig := map[string]any{"caBundle": bundle}
	webhook := map[string]any{"clientConfig": clientConfig}
	conversion := map[string]any{"webhook": webhook}
	switch {
	case c.URL != "":
		clientConfig["url"], clientConfig["service"] = c.URL, nil
	case c.Service != nil:
		clientConfig["url"], clientConfig["service"] = nil, map[string]any{"namespace": c.Service.Namespace, "name": c.Service.Name, "path": Path}
	}
	if c.URL != "" || c.Service != nil {
		webhook["conversionReviewVersions"] = []string{"v1"}
		conversion["strategy"] = apiextensionsv1.WebhookConverter
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": crd.ResourceVersion}, // the write's condition
		"spec":     map[string]any{"conversion": conversion},
	})
	if err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); apierrors.IsConflict(err) {
		return err // read again
	} else if err != nil {
		return fmt.Errorf("writing the conversion webhook into the CRD %s: %w", name, err)
	}
	return nil
}

// missingFrom is the certificates of more (PEM) that bundle lacks.
func missingFrom(bundle, more []byte) []byte {
	var out []byte
	for rest := more; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		one := pem.EncodeToMemory(block)
		if !bytes.Contains(bundle, one) {
			out = append(out, one...)
		}
	}
}

// pointsAt: cfg sends conversions where c is to point them.
func (c CRDs) pointsAt(cfg *apiextensionsv1.WebhookClientConfig) bool {
	switch {
	case c.URL != "":
		return cfg.URL != nil && *cfg.URL == c.URL && cfg.Service == nil
	case c.Service != nil:
		s := cfg.Service
		return cfg.URL == nil && s != nil && s.Namespace == c.Service.Namespace && s.Name == c.Service.Name && s.Path != nil && *s.Path == Path
	}
	return true
}

// Hosts are the names the API server reaches a Service at.
func (s Service) Hosts() []string {
	base := s.Name + "." + s.Namespace + ".svc"
	return []string{base, base + ".cluster.local"}
}

// ServiceHosts are the names the API server reaches the Service that the
// CRDs send their conversions to, for the certificate.
func (c CRDs) ServiceHosts(ctx context.Context) ([]string, error) {
	var hosts []string
	for _, name := range c.Names {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return nil, fmt.Errorf("reading the CRD %s: %w", name, err)
		}
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
			return nil, fmt.Errorf("the CRD %s does not send its conversions to stencil's webhook Service (spec.conversion: strategy Webhook, clientConfig.service): install it from config/crd, whose patch sets them, or run stencil with --webhook-url", name)
		}
		svc := conv.Webhook.ClientConfig.Service
		for _, h := range (Service{Namespace: svc.Namespace, Name: svc.Name}).Hosts() {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts, nil
}
