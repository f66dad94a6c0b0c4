// Package localcluster starts and stops a real Kubernetes control plane on
// loopback, built from Go modules: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok with fake nodes whose pods
// report Running without containers.
//
// The same code serves the integration tests (one cluster per test package),
// the e2e suite, the benchmarks and `make run` (unless given a CONTEXT).
//
// Invariants:
//   - Nothing listens on anything but 127.0.0.1.
//   - No process outlives the program that started it: every child is started
//     with a parent-death signal from one OS thread that lives as long as the
//     program, and Stop terminates them in reverse start order. A test binary
//     that panics, times out or is interrupted takes its control plane with it.
//   - Binaries come from one folder (see [BinDir]), built by `make tools`.
package localcluster
