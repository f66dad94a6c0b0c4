package conversion

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
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

func (c CRDs) inject(ctx context.Context, name string, bundle []byte) error {
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
	if c.URL == "" && (conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || cfg.Service == nil) {
		return fmt.Errorf("the CRD %s does not send its conversions to stencil's webhook Service (spec.conversion: strategy Webhook, clientConfig.service): install it from config/crd, whose patch sets them, or run stencil with --webhook-url", name)
	}
	if string(cfg.CABundle) == string(bundle) && (c.URL == "" || cfg.URL != nil && *cfg.URL == c.URL && cfg.Service == nil) {
		return nil
	}
	clientConfig := map[string]any{"caBundle": bundle}
	webhook := map[string]any{"clientConfig": clientConfig}
	conversion := map[string]any{"webhook": webhook}
	if c.URL != "" {
		clientConfig["url"], clientConfig["service"] = c.URL, nil
		webhook["conversionReviewVersions"] = []string{"v1"}
		conversion["strategy"] = apiextensionsv1.WebhookConverter
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": conversion}})
	if err != nil {
		return err
	}
	if err := c.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("writing the conversion webhook into the CRD %s: %w", name, err)
	}
	return nil
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
		base := svc.Name + "." + svc.Namespace + ".svc"
		for _, h := range []string{base, base + ".cluster.local"} {
			if !contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	return hosts, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
