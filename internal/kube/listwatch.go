package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListWatchAPI is the part of a typed namespaced client that an informer
// needs, e.g. client.CoreV1().Pods(ns); L is its list type.
type ListWatchAPI[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// SelectedListWatch lists and watches through api with every request
// narrowed server-side by labelSelector and fieldSelector; an empty one
// leaves that part of the request as the caller made it.
func SelectedListWatch[L runtime.Object](api ListWatchAPI[L], labelSelector, fieldSelector string) *cache.ListWatch {
	narrow := func(o *metav1.ListOptions) {
		if labelSelector != "" {
			o.LabelSelector = labelSelector
		}
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			return api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			return api.Watch(ctx, o)
		},
	}
}
