package conversion

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the certificate's Secret: the serving pair, as kubernetes.io/tls,
// and the CA bundle the CRDs hold.
const (
	caKey = "ca.crt"
	// keyKey holds the key that signs the fields conversions keep in
	// annotations (see render.ConvertOptions.Key): made once, kept across
	// renewals, shared by the replicas.
	keyKey = "conversion.key"
	// validity of a certificate stencil makes; renewBefore, how long
	// before it expires stencil makes the next.
	validity    = 365 * 24 * time.Hour
	renewBefore = 30 * 24 * time.Hour
	// checkEvery: how often a replica looks at the Secret again (another
	// replica may have renewed it).
	checkEvery = time.Hour
)

// Certs is the webhook's serving certificate, made by stencil: kept in a
// Secret that every replica serves from, or, run locally, in memory.
type Certs struct {
	// Hosts are the names (or IPs) the certificate is for.
	Hosts []string
	// Secret holds the certificate; nil keeps it in memory (one process).
	Secret *types.NamespacedName
	Client client.Client
	// Inject writes a CA bundle into the CRDs.
	Inject func(ctx context.Context, bundle []byte) error
	Log    logr.Logger

	cert   atomic.Pointer[tls.Certificate]
	bundle atomic.Pointer[[]byte]
	key    atomic.Pointer[[]byte]
	// ready: the first Ensure succeeded (see [Certs.Setup]).
	ready atomic.Bool
}

// Setup is the first Ensure, at start: its failure is logged and retried
// in the background (Start), so that a conversion webhook that cannot be
// set up yet (the CRDs not installed, RBAC missing) stops no kind.
func (c *Certs) Setup(ctx context.Context) {
	if err := c.Ensure(ctx); err != nil {
		c.Log.Error(err, "Setting up the conversion webhook; conversions fail until it is, stencil tries again")
		return
	}
	c.ready.Store(true)
}

// GetCertificate is the webhook server's tls.Config.GetCertificate.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if crt := c.cert.Load(); crt != nil {
		return crt, nil
	}
	return nil, errors.New("stencil has no serving certificate yet")
}

// Key is the key that signs the fields conversions keep in annotations:
// the Secret's, which every replica shares; nil when the certificate is
// kept in memory (one process, run locally: kept fields are not signed)
// or not read yet.
func (c *Certs) Key() []byte {
	if k := c.key.Load(); k != nil {
		return *k
	}
	return nil
}

// Bundle is the CA bundle the CRDs are to hold.
func (c *Certs) Bundle() []byte {
	if b := c.bundle.Load(); b != nil {
		return *b
	}
	return nil
}

// Ensure makes the certificate, reads the one another replica made, or
// renews one that is about to expire, and has the CRDs hold its CA. A new
// CA reaches the CRDs (beside the old one) before the Secret, so no
// replica serves a certificate the API server cannot verify.
func (c *Certs) Ensure(ctx context.Context) error {
	if c.Secret == nil {
		// One process: the certificate it serves is the one it points
		// the CRDs at.
		if c.cert.Load() == nil {
			crt, key, ca, err := c.generate()
			if err != nil {
				return err
			}
			if err := c.use(crt, key, ca); err != nil {
				return err
			}
		}
		return c.Inject(ctx, c.Bundle())
	}
	secret := &corev1.Secret{}
	err := c.Client.Get(ctx, *c.Secret, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Secret.Namespace, Name: c.Secret.Name}, Type: corev1.SecretTypeTLS}
	case err != nil:
		return fmt.Errorf("reading the webhook certificate's Secret %s: %w", c.Secret, err)
	}
	if c.fresh(secret.Data) {
		if len(secret.Data[keyKey]) != signingKeyBytes {
			return c.store(ctx, secret, secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[caKey])
		}
		if err := c.Inject(ctx, secret.Data[caKey]); err != nil {
			return err
		}
		signing := secret.Data[keyKey]
		c.key.Store(&signing)
		return c.use(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[caKey])
	}
	return c.renew(ctx, secret)
}

// signingKeyBytes is the size of the key that signs kept fields
// (HMAC-SHA256's).
const signingKeyBytes = 32

// renew makes a certificate and stores it in secret, after the CRDs got its
// CA beside the CAs still valid; when another replica stored one first,
// that one is used.
func (c *Certs) renew(ctx context.Context, secret *corev1.Secret) error {
	crt, key, ca, err := c.generate()
	if err != nil {
		return err
	}
	return c.store(ctx, secret, crt, key, slices.Concat(ca, stillValid(secret.Data[caKey], time.Now())))
}

// store writes the certificate (crt and key, whose CA bundle is bundle)
// into secret, with the signing key it holds or, the first time, a new
// one, after the CRDs got the bundle; when another replica stored one
// first, that one is used.
func (c *Certs) store(ctx context.Context, secret *corev1.Secret, crt, key, bundle []byte) error {
	if err := c.Inject(ctx, bundle); err != nil {
		return err
	}
	signing := secret.Data[keyKey]
	if len(signing) != signingKeyBytes {
		signing = make([]byte, signingKeyBytes)
		if _, err := rand.Read(signing); err != nil {
			return fmt.Errorf("making the key that signs kept fields: %w", err)
		}
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, caKey: bundle, keyKey: signing}
	var err error
	if secret.ResourceVersion == "" {
		err = c.Client.Create(ctx, secret)
	} else {
		err = c.Client.Update(ctx, secret)
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		c.Log.Info("Another replica renewed the webhook certificate first; using it", "secret", c.Secret.String())
		return c.Ensure(ctx)
	}
	if err != nil {
		return fmt.Errorf("storing the webhook certificate in %s: %w", c.Secret, err)
	}
	c.Log.Info("Stored the webhook's serving certificate and signing key", "secret", c.Secret.String(), "hosts", c.Hosts, "validFor", validity)
	c.key.Store(&signing)
	return c.use(crt, key, bundle)
}

// Rotate runs Ensure every checkEvery until ctx ends, and after a failure
// again within a second, then less often up to a minute: a manager
// Runnable, run by every replica. ok says whether the last Ensure
// succeeded.
func (c *Certs) Rotate(ctx context.Context, ok bool) error {
	retry := time.Second
	for {
		wait := checkEvery
		if !ok {
			wait, retry = retry, min(2*retry, time.Minute)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		err := c.Ensure(ctx)
		if ok = err == nil; ok {
			retry = time.Second
		} else {
			c.Log.Error(err, "Setting up the conversion webhook's certificate; trying again", "in", retry)
		}
	}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (c *Certs) NeedLeaderElection() bool { return false }

// Start is [Certs.Rotate], for the manager, after the first Ensure.
func (c *Certs) Start(ctx context.Context) error { return c.Rotate(ctx, c.ready.Load()) }

// fresh: data holds a certificate for the hosts that is not about to
// expire, and its CA bundle.
func (c *Certs) fresh(data map[string][]byte) bool {
	if len(data[caKey]) == 0 {
		return false
	}
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < renewBefore {
		return false
	}
	for _, h := range c.Hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// generate makes a CA and a certificate it signs for the hosts.
func (c *Certs) generate() (crt, key, ca []byte, err error) {
	if len(c.Hosts) == 0 {
		return nil, nil, nil, errors.New("the webhook certificate names no host")
	}
	var ips []net.IP
	var dns []string
	for _, h := range c.Hosts[1:] {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	chain, key, err := cert.GenerateSelfSignedCertKeyWithOptions(cert.SelfSignedCertKeyOptions{Host: c.Hosts[0], AlternateIPs: ips, AlternateDNS: dns, MaxAge: validity})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("making the webhook certificate: %w", err)
	}
	certs, err := cert.ParseCertsPEM(chain)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the webhook certificate: %w", err)
	}
	i := slices.IndexFunc(certs, func(c *x509.Certificate) bool { return c.IsCA })
	if i < 0 {
		return nil, nil, nil, errors.New("the webhook certificate has no CA")
	}
	return chain, key, pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: certs[i].Raw}), nil
}

func (c *Certs) use(crt, key, bundle []byte) error {
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("loading the webhook certificate: %w", err)
	}
	if old := c.bundle.Load(); old == nil || !bytes.Equal(*old, bundle) {
		c.bundle.Store(&bundle)
	}
	c.cert.Store(&pair)
	return nil
}

// stillValid is the certificates of a PEM bundle that have not expired at
// now, as PEM.
func stillValid(bundle []byte, now time.Time) []byte {
	certs, err := cert.ParseCertsPEM(bundle)
	if err != nil {
		return nil
	}
	var out []byte
	for _, c := range certs {
		if now.Before(c.NotAfter) {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: c.Raw})...)
		}
	}
	return out
}
