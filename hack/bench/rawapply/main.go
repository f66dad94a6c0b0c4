// Command rawapply is the floor that `make bench` measures stencil against:
// it server-side-applies a list of objects once each, with a fixed number of
// workers and no client-side rate limit, then exits. Nothing can converge
// faster on the same API server than applying each object once.
//
// The objects come as one JSON object per line (what the bench command
// renders from the same custom resources stencil gets). On success it prints
// its peak RSS and the part of its RSS that is the mapped binary, as the
// lines "VmHWM: <n> kB" and "RssFile: <n> kB" of /proc/self/status.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	file := flag.String("f", "", "File of objects, one JSON object per line.")
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig of the API server.")
	workers := flag.Int("workers", 8, "Applies in flight at once.")
	manager := flag.String("field-manager", "rawapply", "Field manager of the applies.")
	flag.Parse()
	if err := run(*file, *kubeconfig, *workers, *manager); err != nil {
		fmt.Fprintln(os.Stderr, "rawapply:", err)
		os.Exit(1)
	}
	// The parent cannot read this after the exit, and the kernel's
	// ru_maxrss for a child counts the parent's memory at fork.
	peak, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range strings.Lines(string(peak)) {
			if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "RssFile:") {
				fmt.Print(line)
			}
		}
	}
}

func run(file, kubeconfig string, workers int, manager string) error {
	objs, err := readObjects(file)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = -1 // no client-side rate limit
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	jobs := make(chan *unstructured.Unstructured)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range jobs {
				if err := apply(client, o, manager); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, o := range objs {
			select {
			case jobs <- o:
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

func apply(client dynamic.Interface, o *unstructured.Unstructured, manager string) error {
	gvr, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
	_, err := client.Resource(gvr).Namespace(o.GetNamespace()).Apply(context.Background(), o.GetName(), o,
		metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func readObjects(file string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	var objs []*unstructured.Unstructured
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		o := &unstructured.Unstructured{}
		if err := json.Unmarshal(scanner.Bytes(), &o.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		objs = append(objs, o)
	}
	return objs, scanner.Err()
}
