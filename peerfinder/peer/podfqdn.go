package peer

import "strings"

// PodFQDN is the name Kubernetes DNS gives a pod by its IP:
// <ip with dashes>.<namespace>.pod.<domain>, e.g.
// 10-1-2-3.db.pod.cluster.local (":" becomes "-" in IPv6 addresses). It
// names peers found without a governing service.
func PodFQDN(ip, namespace, domain string) string {
	dashed := strings.NewReplacer(".", "-", ":", "-").Replace(ip)
	return strings.ToLower(dashed + "." + namespace + ".pod." + strings.Trim(domain, "."))
}
