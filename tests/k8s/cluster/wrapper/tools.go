//go:build tools

// Package tools pins what the build compiles, so `go mod tidy` keeps it.
package tools

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	_ "k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubectl/pkg/cmd/util"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
