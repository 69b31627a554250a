//go:build tools

// Package tools pins the Kubernetes commands built by hack/build-controlplane.sh.
// It is never compiled; it only keeps the dependencies in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
