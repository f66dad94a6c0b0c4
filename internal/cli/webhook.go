package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/stencil-operator/stencil/internal/operator/conversion"
	"github.com/stencil-operator/stencil/reconciler"
	"github.com/stencil-operator/stencil/render"
)

// webhookOptions are the conversion webhook's flags.
type webhookOptions struct {
	bindAddress string
	url         string
	certDir     string
	certSecret  string
	service     string
}

func (w *webhookOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&w.bindAddress, "webhook-bind-address", "", `Address the conversion webhook of the kinds with several versions binds to (default: the host and port of --webhook-url, else ":9443"). Served when a kind has several versions, or the project's Setup registers a webhook of its own (mgr.GetWebhookServer()).`)
	fs.StringVar(&w.url, "webhook-url", "", "URL the API server reaches this process's conversion webhook at, for a run outside the cluster (make run, tests), e.g. https://127.0.0.1:9443/convert: stencil points its CRDs at it, with a certificate it makes and keeps in memory. Empty: the CRDs send conversions to stencil's Service (config/crd), and stencil writes only their CA bundle.")
	fs.StringVar(&w.certDir, "webhook-cert-dir", "", "Folder holding tls.crt and tls.key for the webhook server (the conversion webhook, and the project's own webhooks), made by someone else (cert-manager, whose CA injector then writes the CA bundles: docs/evolve-api.md, docs/go-beside-templates.md). Empty: for the conversion webhook, stencil makes the certificate, keeps it in --webhook-cert-secret, renews it and writes the CA bundle into its CRDs.")
	fs.StringVar(&w.service, "webhook-service", "", "Service, <namespace>/<name>, that stencil points its CRDs' conversion webhook at (the Helm chart passes its release's). Empty: the Service the CRDs name (config/crd), or --webhook-url.")
	fs.StringVar(&w.certSecret, "webhook-cert-secret", "", "Secret, <namespace>/<name>, that holds the certificate stencil makes for its conversion webhook, shared by its replicas (default: <leader election namespace>/<operator>-webhook-cert).")
}

// address is where the webhook server listens.
func (w webhookOptions) address() (host string, port int, err error) {
	addr := w.bindAddress
	if addr == "" && w.url != "" {
		u, err := url.Parse(w.url)
		if err != nil || u.Scheme != "https" || u.Port() == "" {
			return "", 0, fmt.Errorf("--webhook-url %q: want https://<host>:<port>/convert", w.url)
		}
		addr = u.Host
	}
	if addr == "" {
		addr = ":9443"
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("--webhook-bind-address %q: %w", addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("--webhook-bind-address %q: %w", addr, err)
	}
	return h, port, nil
}

// conversionWebhook is what serving the conversion webhook needs: the
// server, for the manager's options, and the certificate, checked again
// in the background.
type conversionWebhook struct {
	server webhook.Server
	certs  *conversion.Certs // nil: certificates from --webhook-cert-dir
	kinds  []*render.Kind
	crds   []string // the kinds' CRDs
	// schemas are the CRDs' schemas, read from the API server.
	schemas *conversion.Schemas
}

// setUpConversion prepares the conversion webhook of the kinds with several
// versions, and has their CRDs send conversions to it; nil when no kind
// has several versions. A kind whose CRD is not served yet is left out
// (it waits, as every kind whose CRD is missing does).
func setUpConversion(ctx context.Context, cfg *rest.Config, o managerOptions, loaded []*render.Kind, log logr.Logger) (*conversionWebhook, error) {
	var kinds []*render.Kind
	for _, k := range loaded {
		if k.Conversion().Converts() {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	if len(o.watchNamespaces) > 0 && o.webhook.certDir == "" {
		// CRDs are cluster-scoped, beyond a namespaced install's rights.
		log.Info("A namespace-scoped stencil writes no CRD: the conversion webhook of the kinds with several versions is served only with --webhook-cert-dir, the cluster's admin pointing the CRDs at it (docs/evolve-api.md)", "kinds", len(kinds))
		return nil, nil
	}
	host, port, err := o.webhook.address()
	if err != nil {
		return nil, err
	}
	c, err := crdClient(cfg, corev1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook: %w", err)
	}
	names, err := crdNames(ctx, cfg, c, kinds, log)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		log.Info("No CRD of a kind with several versions is served yet: the conversion webhook is set up when stencil next starts")
		return nil, nil
	}
	w := &conversionWebhook{kinds: kinds, crds: names, schemas: &conversion.Schemas{Client: c, Names: names, Log: log.WithName("conversion")}}
	opts := webhook.Options{Host: host, Port: port, CertDir: o.webhook.certDir}
	if o.webhook.certDir == "" {
		crds := conversion.CRDs{Client: c, Names: names, URL: o.webhook.url}
		if crds.Service, err = o.webhook.serviceRef(); err != nil {
			return nil, err
		}
		w.certs = &conversion.Certs{Client: c, Inject: crds.Inject, Log: log.WithName("conversion")}
		if o.webhook.url != "" {
			u, _ := url.Parse(o.webhook.url)
			w.certs.Hosts = []string{u.Hostname()}
		} else {
			if crds.Service != nil {
				w.certs.Hosts = crds.Service.Hosts()
			} else if w.certs.Hosts, err = crds.ServiceHosts(ctx); err != nil {
				log.Error(err, "The conversion webhook is not served: stencil does not know the names of the Service its certificate is for (a restart tries again)")
				return nil, nil
			}
			if w.certs.Secret, err = certSecret(o); errors.Is(err, errNoNamespace) {
				// Out of a cluster with no flag that says where: the
				// operator runs; only the conversion waits for a restart
				// with one of them.
				log.Error(err, "The conversion webhook is not served: its kinds' other versions cannot be read or written", "kinds", len(kinds))
				return nil, nil
			} else if err != nil {
				return nil, err
			}
		}
		w.certs.Setup(ctx)
		opts.TLSOpts = []func(*tls.Config){func(t *tls.Config) { t.GetCertificate = w.certs.GetCertificate }}
	}
	// HTTP/1.1 only, as kubebuilder's scaffold does since HTTP/2's rapid
	// reset (CVE-2023-44487): the API server needs no more.
	opts.TLSOpts = append(opts.TLSOpts, func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} })
	w.server = webhook.NewServer(opts)
	log.Info("Serving the conversion webhook", "crds", names, "address", net.JoinHostPort(host, strconv.Itoa(port)), "url", o.webhook.url)
	return w, nil
}

// register adds the handler to the server, with the kinds as they are now.
func (w *conversionWebhook) register(live *reconciler.LiveKinds, log logr.Logger) {
	byKind := map[schema.GroupKind]*render.Kind{}
	for _, k := range w.kinds {
		byKind[k.GroupVersionKind().GroupKind()] = k
	}
	lookup := func(gk schema.GroupKind) *render.Kind {
		if live != nil {
			if k := live.Kind(gk); k != nil {
				return k
			}
		}
		return byKind[gk]
	}
	h := &conversion.Handler{Kind: lookup, Schema: w.schemas.For, Storage: w.schemas.Storage, Log: log.WithName("conversion")}
	if w.certs != nil {
		// Run locally the certificate, and no key, is in memory: kept
		// fields are then not signed (only schema-checked).
		h.Key = w.certs.Key
	}
	w.server.Register(conversion.Path, h)
}

// migrator rewrites the kinds' stored resources at their storage version,
// as the leader, with cfg's (fenced) writes.
func (w *conversionWebhook) migrator(cfg *rest.Config, log logr.Logger) (*conversion.Migrator, error) {
	c, err := crdClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("storage migration: %w", err)
	}
	return &conversion.Migrator{Client: c, CRDs: w.crds, QPS: conversion.DefaultMigrationQPS, Log: log.WithName("migration")}, nil
}

// serviceRef is --webhook-service, nil when unset.
func (w webhookOptions) serviceRef() (*conversion.Service, error) {
	if w.service == "" {
		return nil, nil
	}
	if w.url != "" {
		return nil, errors.New("--webhook-service and --webhook-url: give one")
	}
	ns, name, ok := strings.Cut(w.service, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--webhook-service %q: want <namespace>/<name>", w.service)
	}
	return &conversion.Service{Namespace: ns, Name: name}, nil
}

// errNoNamespace: stencil runs outside a pod and no flag names the
// namespace of the webhook certificate's Secret.
var errNoNamespace = errors.New("no namespace for the webhook certificate")

// certSecret is the Secret stencil keeps its webhook certificate in. Out
// of a pod with no flag that names its namespace, the error wraps
// errNoNamespace; in a pod that cannot tell its namespace, it does not:
// that is a broken install, which stops the operator.
func certSecret(o managerOptions) (*types.NamespacedName, error) {
	if o.webhook.certSecret != "" {
		ns, name, ok := strings.Cut(o.webhook.certSecret, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--webhook-cert-secret %q: want <namespace>/<name>", o.webhook.certSecret)
		}
		return &types.NamespacedName{Namespace: ns, Name: name}, nil
	}
	ns, err := leaseNamespace(o.leaderElectionNS)
	if err != nil && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, fmt.Errorf("%w: the conversion webhook's certificate: %w (or set --webhook-url, or --webhook-cert-secret)", errNoNamespace, err)
	}
	if err != nil {
		return nil, fmt.Errorf("the conversion webhook's certificate: %w (or set --webhook-cert-secret)", err)
	}
	return &types.NamespacedName{Namespace: ns, Name: o.project.Name + "-webhook-cert"}, nil
}

// crdNames are the names of the kinds' CRDs, from discovery; a kind that is
// not served yet is left out, with a log line.
func crdNames(ctx context.Context, cfg *rest.Config, c client.Client, kinds []*render.Kind, log logr.Logger) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("conversion webhook: %w", err)
	}
	var names []string
	for _, k := range kinds {
		crd, err := kindCRD(ctx, dc, c, k)
		if err != nil {
			log.Error(err, "A kind with several versions is not served yet; its CRD gets no conversion webhook until stencil restarts", "kind", k.GroupVersionKind().Kind)
			continue
		}
		names = append(names, crd.Name)
	}
	return names, nil
}
