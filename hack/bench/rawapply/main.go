// Command rawapply is the floor that `make bench` measures stencil against:
// it server-side-applies each custom resource's objects once, with a fixed
// number of workers and no client-side rate limit, then exits. Nothing can
// converge faster on the same API server than applying each object once.
//
// The input is one JSON line per custom resource (what the bench command
// renders from the same custom resources stencil gets): its objects and,
// optionally, a status to write once they are applied, as a JSON merge patch
// of the resource's /status. With those status lines it is the floor of any
// operator that marks each resource Ready for its generation.
//
// On success it prints its peak RSS and the part of its RSS that is the
// mapped binary, as the lines "VmHWM: <n> kB" and "RssFile: <n> kB" of
// /proc/self/status.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stencil-operator/stencil/hack/bench/peak"
)

// job is one custom resource's share of the work, one line of the input.
type job struct {
	Objects []*unstructured.Unstructured `json:"objects"`
	Status  *statusWrite                 `json:"status,omitempty"`
}

// statusWrite is a JSON merge patch of one resource's /status.
type statusWrite struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Patch      json.RawMessage `json:"patch"`
}

func main() {
	file := flag.String("f", "", "File of custom resources' work, one JSON line each: {objects, status}.")
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig of the API server.")
	workers := flag.Int("workers", 8, "Custom resources worked on at once.")
	manager := flag.String("field-manager", "rawapply", "Field manager of the applies and status writes.")
	flag.Parse()
	if err := run(*file, *kubeconfig, *workers, *manager); err != nil {
		fmt.Fprintln(os.Stderr, "rawapply:", err)
		os.Exit(1)
	}
	if err := peak.Print(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rawapply: reading its memory:", err)
		os.Exit(1)
	}
}

func run(file, kubeconfig string, workers int, manager string) error {
	jobs, err := readJobs(file)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = -1                  // no client-side rate limit
	cfg.DisableCompression = true // as stencil: no gzip next to the API server
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	queue := make(chan job)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range queue {
				if err := do(client, j, manager); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(queue)
		for _, j := range jobs {
			select {
			case queue <- j:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	return <-errs
}

// do applies a resource's objects one after the other, then writes its status.
func do(client dynamic.Interface, j job, manager string) error {
	ctx := context.Background()
	for _, o := range j.Objects {
		gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		_, err := client.Resource(gvr).Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o,
			metav1.ApplyOptions{FieldManager: manager, Force: true})
		if err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if s := j.Status; s != nil {
		gvr, _ := meta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(s.APIVersion, s.Kind))
		_, err := client.Resource(gvr).Namespace(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, s.Patch,
			metav1.PatchOptions{FieldManager: manager + "-status"}, "status")
		if err != nil {
			return fmt.Errorf("writing the status of %s %s/%s: %w", s.Kind, s.Namespace, s.Name, err)
		}
	}
	return nil
}

func readJobs(file string) ([]job, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	var jobs []job
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var j job
		if err := json.Unmarshal(scanner.Bytes(), &j); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, scanner.Err()
}
