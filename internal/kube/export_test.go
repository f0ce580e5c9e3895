package kube

import "k8s.io/apimachinery/pkg/runtime"

// DecodeSlim decodes b (protobuf with the API server's envelope, or JSON)
// with the serializers of Client.SlimPods.
func DecodeSlim(b []byte) (runtime.Object, error) {
	obj, _, err := slimCodecs.UniversalDeserializer().Decode(b, nil, nil)
	return obj, err
}
