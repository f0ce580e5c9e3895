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

// FQDN is a member's name in the cluster's DNS:
// <host>.<service>.<namespace>.svc.<domain>, lower case, without the
// trailing dot. With host "" it is the service's own name.
func FQDN(host, service, namespace, domain string) string {
	name := service + "." + namespace + ".svc." + strings.Trim(domain, ".")
	if host != "" {
		name = host + "." + name
	}
	return strings.ToLower(name)
}
