package peerfinder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/bootstrap"
	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/flockd/flock/peerfinder/peer"
)

// evaluateWithin bounds how long diagnose waits for the pipeline's first
// evaluation with every input.
const evaluateWithin = 5 * time.Second

// errHeldBack is returned by diagnose when delivery would not happen now.
var errHeldBack = errors.New("delivery is held back")

// diagnose prints, once, what peer-finder sees and which gate holds delivery
// back, with advice on what to change. It only reads: it never writes the
// cluster Lease nor runs a hook. It returns errHeldBack when a real run would
// not deliver now (a gate holds, or a permission it needs is missing).
func diagnose(ctx context.Context, cfg *config.Config, p *pipeline, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+evaluateWithin)
	defer cancel()
	f := facts{cfg: cfg}
	fmt.Fprintf(w, "domain:    %s (from %s)\n", cfg.Domain, cfg.DomainSource)
	fmt.Fprintf(w, "service:   %s\n", cfg.ServiceFQDN())
	fmt.Fprintf(w, "self:      %s (pod %s)\n", cfg.Self(), cfg.Bootstrap.PodName)
	if cfg.Kube.UsesDNS() {
		fmt.Fprintf(w, "dns:       %s\n", strings.Join(cfg.DNSServers, ", "))
	}

	diagnoseAPI(ctx, cfg, p.kube, w, &f)

	// The real pipeline's first evaluation: its sources, expected size and
	// membership step, without sinks.
	evalCtx, stopEval := context.WithTimeout(ctx, evaluateWithin)
	err := p.engine.FirstEvaluation(evalCtx)
	stopEval()
	if err != nil {
		return err
	}
	st := p.engine.Status()
	for _, view := range st.Views {
		if !view.Reported {
			fmt.Fprintf(w, "source %s: no answer within %s (its errors are logged above)\n", view.Source, evaluateWithin)
			if view.Source == config.SourceDNS {
				f.dnsSilent = true
			}
			continue
		}
		fmt.Fprintf(w, "source %s: %d peers\n", view.Source, len(view.Peers))
		for _, pr := range peer.NewSet(view.Peers...).Peers() {
			fmt.Fprintf(w, "  %s %s ready=%v ordinal=%d\n", pr.Key(), strings.Join(pr.IPs, ","), pr.Ready, pr.Ordinal)
		}
		if len(view.Peers) == 0 && view.Source == config.SourceDNS {
			f.dnsSilent = true
		}
	}
	switch {
	case cfg.Bootstrap.ExpectAuto && st.ExpectPending:
		fmt.Fprintf(w, "expect:    unknown: the owning StatefulSet was not read within %s (see the log above)\n", evaluateWithin)
	case cfg.Bootstrap.ExpectAuto && p.boot.replicas != nil:
		fmt.Fprintf(w, "expect:    %d (spec.replicas of StatefulSet %s, first ordinal %d)\n", st.Expect, p.boot.replicas.StatefulSet(), p.boot.replicas.FirstOrdinal())
	case cfg.Bootstrap.Expect > 0:
		fmt.Fprintf(w, "expect:    %d (-expect)\n", cfg.Bootstrap.Expect)
	}
	set, v := st.Set, st.Verdict
	if v.Reason == "" { // no input arrived at all: no evaluation ran
		v = membership.Verdict{Reason: membership.WaitSources, Detail: fmt.Sprintf("no source answered within %s", evaluateWithin)}
	}
	roleOK := diagnoseRole(ctx, cfg, p.boot, set, w)

	// -stable-for is the last gate, timed from the set's last change, and
	// diagnose's own first sight of the set counts as one: a set unchanged
	// for hours would wait here too. It is a wait, not a cause: every
	// other gate passed.
	deliver := v.Publishable() || v.Reason == membership.WaitStable
	switch {
	case v.Publishable():
		fmt.Fprintf(w, "verdict:   deliver (%d peers)\n", v.Peers)
	case deliver:
		fmt.Fprintf(w, "verdict:   deliver (%d peers) once the set stays unchanged for %s (-stable-for)\n", v.Peers, cfg.StableFor)
	default:
		fmt.Fprintf(w, "verdict:   wait: %s: %s\n", v.Reason, v.Detail)
	}
	for _, h := range advice(v.Reason, f) {
		fmt.Fprintf(w, "hint:      %s\n", h)
	}
	if !deliver || len(f.missing) > 0 || f.apiErr != nil || !roleOK {
		return errHeldBack
	}
	return nil
}

// diagnoseAPI builds the client when any part needs it (or -kubeconfig or
// -master asks for it), checks every permission cfg needs with
// SelfSubjectAccessReviews, and reads the governing Service.
func diagnoseAPI(ctx context.Context, cfg *config.Config, kc *kubeClient, w io.Writer, f *facts) {
	needed := requiredAccess(cfg)
	wanted := len(needed) > 0 || cfg.Kube.Kubeconfig != "" || cfg.Kube.Master != ""
	client, err := kc.Get()
	if err != nil {
		if wanted {
			f.apiErr = err
			fmt.Fprintf(w, "api:       unavailable: %v\n", err)
		} else {
			fmt.Fprintf(w, "api:       not used (no API source or flag needs it)\n")
		}
		return
	}
	for _, a := range needed {
		allowed, err := canI(ctx, client, cfg.Namespace, a)
		switch {
		case err != nil:
			fmt.Fprintf(w, "rbac:      cannot check %s: %v\n", a, err)
		case allowed:
			fmt.Fprintf(w, "rbac:      ok       %s (for %s)\n", a, strings.Join(a.For, ", "))
		default:
			f.missing = append(f.missing, a)
			fmt.Fprintf(w, "rbac:      MISSING  %s (for %s)\n", a, strings.Join(a.For, ", "))
		}
	}
	for _, a := range optionalAccess(cfg) {
		allowed, err := canI(ctx, client, cfg.Namespace, a)
		switch {
		case err != nil:
			fmt.Fprintf(w, "rbac:      cannot check %s: %v\n", a, err)
		case allowed:
			fmt.Fprintf(w, "rbac:      optional ok   %s (for %s)\n", a, strings.Join(a.For, ", "))
		default:
			fmt.Fprintf(w, "rbac:      optional no   %s (for %s: none are sent; see examples/rbac/events.yaml)\n", a, strings.Join(a.For, ", "))
		}
	}
	if cfg.Service == "" {
		fmt.Fprintf(w, "service:   none (-source=pods without -service: peers are named by IP)\n")
		return
	}
	svc, err := client.Services(cfg.Namespace).Get(ctx, cfg.Service, metav1.GetOptions{})
	switch {
	case err == nil:
		f.service = svc
		headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
		fmt.Fprintf(w, "service:   found; headless=%v publishNotReadyAddresses=%v selector=%v\n",
			headless, svc.Spec.PublishNotReadyAddresses, svc.Spec.Selector)
	default:
		t := kube.Target{Resource: "services", Namespace: cfg.Namespace, Verbs: []string{"get"}}
		p := kube.Classify(err, "get", t)
		switch {
		case p.Class == "forbidden":
			fmt.Fprintf(w, "service:   not checked (optional: get services is not granted)\n")
		case apierrors.IsNotFound(err):
			f.serviceMissing = true
			fmt.Fprintf(w, "service:   %s/%s does not exist\n", cfg.Namespace, cfg.Service)
		default:
			fmt.Fprintf(w, "service:   not checked: %s\n", t.Describe(err, "get"))
		}
	}
}

// canI asks the API server whether this client may do a.
func canI(ctx context.Context, client *kube.Client, ns string, a access) (bool, error) {
	r, err := client.AccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Name: a.Name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// diagnoseRole prints the bootstrap role a real run would pass to hooks,
// reading (never claiming) the cluster Lease. It returns false when the
// role cannot be decided because an API call failed.
func diagnoseRole(ctx context.Context, cfg *config.Config, b *bootstrapParts, set peer.Set, w io.Writer) bool {
	if !set.Has(cfg.Self()) {
		fmt.Fprintf(w, "bootstrap: not decided until self is in the peer set\n")
		return true
	}
	in, err := b.roler.Input(ctx, set, cfg.Self())
	if err != nil {
		fmt.Fprintf(w, "bootstrap: unknown: %v\n", err)
		return false
	}
	if rd, applies, err := b.roler.RankDecision(ctx, in); errors.Is(err, bootstrap.ErrNoRole) {
		fmt.Fprintf(w, "bootstrap: none yet: %v\n", err)
		return true
	} else if err != nil {
		fmt.Fprintf(w, "bootstrap: unknown: %v\n", err)
		return false
	} else if applies {
		diagnoseRank(w, rd)
		return true
	}
	d := bootstrap.Decide(in)
	role := string(d.Role)
	if role == "" {
		role = "none yet"
	}
	fmt.Fprintf(w, "bootstrap: %s (%s): %s\n", role, d.Reason, d.Detail)
	switch {
	case d.Claim:
		fmt.Fprintf(w, "bootstrap: a real run first records this pod in Lease %s; if another member records itself first, this one joins\n", cfg.Bootstrap.ClusterLease)
	case b.roler.Lease == nil:
		fmt.Fprintf(w, "bootstrap: no -cluster-lease: a first-ordinal pod that lost its data would be told form again\n")
	}
	return true
}

// diagnoseRank prints the rank rule's decision (-form-rank): what is
// awaited, or who forms. Diagnose never runs the rank command.
func diagnoseRank(w io.Writer, rd bootstrap.RankDecision) {
	role := string(rd.Role)
	if role == "" {
		role = "none yet"
	}
	fmt.Fprintf(w, "bootstrap: %s (%s): %s\n", role, rd.Reason, rd.Detail)
	switch {
	case rd.SelfRank:
		fmt.Fprintf(w, "bootstrap: a real run first runs the -form-rank command and records this member's rank in the Lease\n")
	case len(rd.Awaited) > 0 && rd.Role == "":
		fmt.Fprintf(w, "bootstrap: awaiting the ranks of %s (failed: %s) until -bootstrap-timeout\n", strings.Join(rd.Awaited, ", "), cmp.Or(strings.Join(rd.Failed, ", "), "none"))
	case rd.Reason == bootstrap.HighestRank || rd.Reason == bootstrap.LowerRank:
		fmt.Fprintf(w, "bootstrap: a real run records %s in the Lease as the former first; then it forms and every other member joins\n", rd.Former)
	}
}

// facts are what diagnose learned, for advice.
type facts struct {
	cfg            *config.Config
	service        *corev1.Service // nil when not read
	serviceMissing bool
	dnsSilent      bool // the DNS source failed or found nothing
	missing        []access
	apiErr         error
}

// advice says what to change, given the verdict's reason and the facts. It
// is pure.
func advice(r membership.Reason, f facts) []string {
	cfg := f.cfg
	svc := f.service
	var out []string
	if len(f.missing) > 0 {
		var verbs []string
		for _, a := range f.missing {
			verbs = append(verbs, a.String())
		}
		out = append(out, fmt.Sprintf("grant the missing permissions to this pod's service account in namespace %s (%s); see examples/rbac", cfg.Namespace, strings.Join(verbs, "; ")))
	}
	if f.dnsSilent && !f.serviceMissing && (r == membership.WaitSources || r == membership.WaitEmpty) {
		exists := ""
		if svc != nil {
			exists = "the Service exists, but "
		}
		out = append(out, fmt.Sprintf("%sDNS has no records for %s: if the cluster domain is not %s (from %s), pass the right -domain", exists, cfg.ServiceFQDN(), cfg.Domain, cfg.DomainSource))
	}
	if f.serviceMissing {
		out = append(out, fmt.Sprintf("the service %s does not exist in namespace %s; -service must be the StatefulSet's serviceName", cfg.Service, cfg.Namespace))
	}
	notReadyHidden := svc != nil && !svc.Spec.PublishNotReadyAddresses && (cfg.Kube.UsesDNS() || !cfg.Kube.IncludeNotReady)
	switch r {
	case membership.WaitSources:
		out = append(out, "a source could not answer; see its lookup error above (DNS servers, -dns-server, RBAC, -kubeconfig)")
	case membership.WaitEmpty, membership.WaitSelf:
		switch {
		case notReadyHidden:
			out = append(out, fmt.Sprintf("the service %s does not set publishNotReadyAddresses: true, so members are hidden until they are ready (and they cannot be ready before peer-finder delivered): set it on the headless service, or use -source=endpointslice -include-not-ready", cfg.Service))
		case svc == nil && !f.serviceMissing:
			out = append(out, fmt.Sprintf("if the service %s does not set publishNotReadyAddresses: true, members are hidden until ready (the Service could not be read to check)", cfg.Service))
		}
		if svc != nil && svc.Spec.ClusterIP != corev1.ClusterIPNone && cfg.Kube.UsesDNS() {
			out = append(out, fmt.Sprintf("the service %s is not headless (clusterIP: None), so DNS has no per-member records", cfg.Service))
		}

		if r == membership.WaitSelf {
			out = append(out, fmt.Sprintf("this member's name %s is not published; check -hostname (the pod name), -service (the StatefulSet's serviceName) and -domain", cfg.Self()))
		}
	case membership.WaitNames:
		out = append(out, "-wait-for-all holds the first delivery until every expected name (-hosts-expect) has an address: check that those pods exist and have IPs, and that -hosts-name-template gives these names")
	case membership.WaitExpect:
		out = append(out, "-expect=auto cannot read the owning StatefulSet; see the expect line above (RBAC get pods, list statefulsets; the pod must be owned by a StatefulSet)")
	case membership.WaitSize:
		out = append(out, "fewer peers are visible than -min-peers or -expect ask for; wait for the others to start, or lower them")
		if notReadyHidden {
			out = append(out, fmt.Sprintf("members that are not ready are hidden: set publishNotReadyAddresses: true on %s, or use -source=endpointslice -include-not-ready", cfg.Service))
		}
	}
	return out
}
