package hostsfile

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flockd/flock/localcluster/clustertest"
)

// autoArgs turns a container of examples/hostsfile/batch-job.yaml from
// the hand-typed shape (-hosts-expect=ps=1,worker=3) to the shape read
// from the Jobs, joined by their template's app label.
func autoArgs(ctr *corev1.Container) {
	for i, a := range ctr.Args {
		if strings.HasPrefix(a, "-hosts-expect=") {
			ctr.Args[i] = "-hosts-expect=auto"
			ctr.Args = slices.Insert(ctr.Args, i+1, "-hosts-job-label=app")
			return
		}
	}
}

// indexedJob is an Indexed Job of n pods running peer-finder's image
// (kwok runs nothing), suspended: no pod exists until resume.
func indexedJob(name string, n int32, jobLabels, podLabels map[string]string) *batchv1.Job {
	indexed, suspend := batchv1.IndexedCompletion, true
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: jobLabels},
		Spec: batchv1.JobSpec{
			CompletionMode: &indexed, Completions: &n, Parallelism: &n, Suspend: &suspend,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "peer-finder", RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "ghcr.io/flockd/peer-finder:v0.1.0"}},
				},
			},
		},
	}
}

func createJob(t *testing.T, c *clustertest.Cluster, ns string, j *batchv1.Job) {
	t.Helper()
	if _, err := c.Client.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job %s: %v", j.Name, err)
	}
}

func resumeJob(t *testing.T, c *clustertest.Cluster, ns, name string) {
	t.Helper()
	if _, err := c.Client.BatchV1().Jobs(ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("resume job %s: %v", name, err)
	}
}

// noPods fails unless no pod matches selector.
func noPods(t *testing.T, c *clustertest.Cluster, ns, selector string) {
	t.Helper()
	l, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(l.Items) > 0 {
		t.Fatalf("pods %s: %d (err %v), want none yet", selector, len(l.Items), err)
	}
}

// waitExpected waits until the file at path has the block id with want's
// addresses and a "no address yet" comment for each of pending.
func waitExpected(t *testing.T, path, id string, want map[string]string, pending []string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s to map %v and list %q as expected", path, want, pending), func() (bool, string) {
		content, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		got, _, _, err := parseHosts(content, id)
		if err != nil || !maps.Equal(got, want) {
			return false, fmt.Sprintf("%v (err %v) in %q", got, err, content)
		}
		for _, n := range pending {
			if !strings.Contains(string(content), "# no address yet: "+n+"\n") {
				return false, string(content)
			}
		}
		return true, ""
	})
}

// TestHostsExpectAuto: with -hosts-expect=auto the first pod's file lists
// every name of the job while the other roles' Jobs have no pod at all
// (suspended), for the two shapes of a multi-role job: Indexed Jobs joined
// by a label (examples/hostsfile/batch-job.yaml with -hosts-expect=auto
// -hosts-job-label=app instead of ps=1,worker=3; an Indexed Job of another
// app in the namespace is not expected) and a JobSet's Jobs, recognised by
// its labels (the CRD is not installed: plain Jobs with JobSet's labels).
// Each init container exits 0 once every expected name has an address.
// RBAC: the example's Role (pods, events) plus examples/rbac/hosts-expect-auto.yaml.
func TestHostsExpectAuto(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	m := load(t, "examples/hostsfile/batch-job.yaml")
	for _, obj := range m.objs {
		if j, ok := obj.(*batchv1.Job); ok {
			for i := range j.Spec.Template.Spec.InitContainers {
				autoArgs(&j.Spec.Template.Spec.InitContainers[i])
			}
			if j.Name == "train-worker" {
				suspend := true
				j.Spec.Suspend = &suspend
			}
		}
	}
	m.apply(t, c, ns, "ServiceAccount", "Role", "RoleBinding", "Service")
	load(t, "examples/rbac/hosts-expect-auto.yaml").apply(t, c, ns)
	initCtr := container(t, m.podSpec(t, "train-ps"), "peer-finder-init")
	if !slices.Contains(initCtr.Args, "-hosts-expect=auto") {
		t.Fatalf("args not changed to auto: %q", initCtr.Args)
	}
	createJob(t, c, ns, indexedJob("other", 2, nil, map[string]string{"app": "other", "role": "other"}))

	t.Run("Indexed Jobs joined by a label", func(t *testing.T) {
		m.apply(t, c, ns, "Job/train-worker", "Job/train-ps")
		psPod := podsBy(t, c.Client, ns, "app=train,role=ps", 1)[0]
		ps := &member{name: "ps-0", root: newPodRoot(t, c, m, &psPod)}
		ps.init = ps.root.run(t, initCtr)
		waitExpected(t, ps.root.hostsPath(), "train", map[string]string{"ps-0": psPod.Status.PodIP}, []string{"worker-0", "worker-1", "worker-2"})
		noPods(t, c, ns, "app=train,role=worker")
		if l := grep(ps.init.Stderr.String(), "expected names from the job"); len(l) != 1 || !strings.Contains(l[0], `jobs="[train-ps train-worker]"`) {
			t.Errorf("the log does not say that the Jobs train-ps and train-worker (only) were read:\n%s", ps.init.Stderr.String())
		}
		if ps.init.Exited() {
			t.Fatalf("ps-0's init container exited (%d) before the workers existed", ps.init.Status())
		}

		resumeJob(t, c, ns, "train-worker")
		members := []*member{ps}
		for _, p := range podsBy(t, c.Client, ns, "app=train,role=worker", 3) {
			mb := &member{name: "worker-" + p.Labels["batch.kubernetes.io/job-completion-index"], root: newPodRoot(t, c, m, &p)}
			mb.init = mb.root.run(t, initCtr)
			members = append(members, mb)
		}
		want := map[string]string{}
		for _, mb := range members {
			want[mb.name] = mb.root.pod.Status.PodIP
		}
		for _, mb := range members {
			if code := mb.init.WaitWithin(t, wait); code != 0 {
				t.Fatalf("%s: init container exited %d", mb.name, code)
			}
			if got, _, err := hostsEntries(mb.root.hostsPath(), "train"); err != nil || !maps.Equal(got, want) {
				t.Fatalf("%s: at init exit the file maps %v (err %v), want %v", mb.name, got, err, want)
			}
		}
	})

	t.Run("JobSet", func(t *testing.T) {
		jobset := func(rjob string, n int32) *batchv1.Job {
			l := map[string]string{"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": rjob,
				"jobset.sigs.k8s.io/job-index": "0"}
			pl := maps.Clone(l)
			pl["app"] = "js"
			return indexedJob("js-"+rjob+"-0", n, l, pl)
		}
		createJob(t, c, ns, jobset("worker", 2))
		createJob(t, c, ns, jobset("driver", 1))
		resumeJob(t, c, ns, "js-driver-0")
		driverPod := podsBy(t, c.Client, ns, "app=js,jobset.sigs.k8s.io/replicatedjob-name=driver", 1)[0]
		// The pods' own host names (the default template): what JobSet's
		// pods are called in its headless service.
		ctr := corev1.Container{Name: "peer-finder-init", Args: []string{
			"-service=js", "-source=pods", "-selector=app=js", "-include-not-ready", "-hosts-file=/etc/hosts",
			"-hosts-expect=auto", "-wait-for-all", "-once", "-bootstrap-timeout=5m",
		}, Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		}}
		driver := newPodRoot(t, c, m, &driverPod)
		p := driver.run(t, ctr)
		waitExpected(t, driver.hostsPath(), "js", map[string]string{"js-driver-0-0": driverPod.Status.PodIP}, []string{"js-worker-0-0", "js-worker-0-1"})
		noPods(t, c, ns, "app=js,jobset.sigs.k8s.io/replicatedjob-name=worker")
		if p.Exited() {
			t.Fatalf("the driver's init exited (%d) before the workers existed", p.Status())
		}

		resumeJob(t, c, ns, "js-worker-0")
		want := map[string]string{"js-driver-0-0": driverPod.Status.PodIP}
		for _, w := range podsBy(t, c.Client, ns, "app=js,jobset.sigs.k8s.io/replicatedjob-name=worker", 2) {
			want["js-worker-0-"+w.Labels["batch.kubernetes.io/job-completion-index"]] = w.Status.PodIP
		}
		if code := p.WaitWithin(t, wait); code != 0 {
			t.Fatalf("the driver's init exited %d", code)
		}
		if got, _, err := hostsEntries(driver.hostsPath(), "js"); err != nil || !maps.Equal(got, want) {
			t.Fatalf("at init exit the driver's file maps %v (err %v), want %v", got, err, want)
		}
	})
}

// TestHostsExpectAutoRBAC: examples/rbac/hosts-expect-auto.yaml is exactly
// what -hosts-expect=auto needs, against the real API server, for a
// ServiceAccount with only it, serviceaccount.yaml and pods.yaml:
//   - with it, an init-mode run writes every name of the Job and exits 0,
//     and diagnose finds its permissions;
//   - with any one verb taken away, diagnose names that permission MISSING;
//   - with its Role emptied, a run logs that the job cannot be read
//     (forbidden) and gives up at -bootstrap-timeout (exit 3).
func TestHostsExpectAutoRBAC(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	for _, f := range []string{"serviceaccount.yaml", "pods.yaml", "hosts-expect-auto.yaml"} {
		load(t, "examples/rbac/"+f).apply(t, c, ns)
	}
	j := indexedJob("solo", 2, nil, map[string]string{"app": "solo"})
	j.Spec.Suspend = nil
	createJob(t, c, ns, j)
	pods := podsBy(t, c.Client, ns, "app=solo", 2)
	kubeconfig := kubeconfigFor(t, c, ns, "peer-finder")
	hosts := filepath.Join(t.TempDir(), "hosts")
	run := func(name string, extra ...string) *proc {
		return start(t, name, append([]string{"-kubeconfig=" + kubeconfig, "-domain=cluster.local", "-hostname=" + pods[0].Spec.Hostname,
			"-service=solo", "-source=pods", "-selector=app=solo", "-include-not-ready", "-events=off",
			"-hosts-file=" + hosts, "-hosts-expect=auto"}, extra...), []string{"POD_NAME=" + pods[0].Name, "POD_NAMESPACE=" + ns})
	}

	// Sufficient.
	p := run("solo init", "-wait-for-all", "-once", "-bootstrap-timeout=60s")
	if code := p.WaitWithin(t, wait); code != 0 {
		t.Fatalf("with the example Role: exit %d:\n%s", code, p.Stderr.String())
	}
	want := map[string]string{"solo-0": pods[0].Status.PodIP, "solo-1": pods[1].Status.PodIP}
	if got, _, err := hostsEntries(hosts, "solo"); err != nil || !maps.Equal(got, want) {
		t.Fatalf("the file maps %v (err %v), want %v", got, err, want)
	}
	role, err := c.Client.RbacV1().Roles(ns).Get(context.Background(), "peer-finder-hosts-expect-auto", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	perms := map[string]rbacv1.PolicyRule{"get pods": role.Rules[0], "list jobs.batch": role.Rules[1]}
	if len(role.Rules) != 2 || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) || !slices.Equal(role.Rules[1].Verbs, []string{"list"}) {
		t.Fatalf("the example Role changed; update this test: %+v", role.Rules)
	}
	diagnose := func() string {
		d := run("solo diagnose", "-diagnose")
		d.WaitWithin(t, wait)
		return d.Stdout.String()
	}
	out := diagnose()
	for perm := range perms {
		if !strings.Contains(out, "ok       "+perm+" (for -hosts-expect=auto") {
			t.Errorf("diagnose with the example Role does not find %q ok:\n%s", perm, out)
		}
	}

	// Necessary: each verb taken away is named by diagnose.
	for perm := range perms {
		var rules []rbacv1.PolicyRule
		for other, r := range perms {
			if other != perm {
				rules = append(rules, r)
			}
		}
		setRoleRules(t, c, ns, role.Name, rules)
		eventually(t, "diagnose to name "+perm+" missing", func() (bool, string) {
			out := diagnose()
			return strings.Contains(out, "MISSING  "+perm+" "), out
		})
	}

	// Nothing granted: the run says what is refused and gives up in time.
	setRoleRules(t, c, ns, role.Name, nil)
	eventually(t, "diagnose to name both missing", func() (bool, string) {
		out := diagnose()
		return strings.Contains(out, "MISSING  get pods ") && strings.Contains(out, "MISSING  list jobs.batch "), out
	})
	p = run("solo forbidden", "-wait-for-all", "-once", "-bootstrap-timeout=5s")
	if code := p.WaitWithin(t, wait); code != 3 {
		t.Fatalf("with nothing granted: exit %d, want 3:\n%s", code, p.Stderr.String())
	}
	lines := grep(p.Stderr.String(), "cannot read the job for -hosts-expect=auto")
	if len(lines) != 1 || !strings.Contains(lines[0], "forbidden=true") || !strings.Contains(lines[0], `cannot get resource \"pods\"`) {
		t.Errorf("want one forbidden line naming get pods, got:\n%s", p.Stderr.String())
	}
}

func setRoleRules(t *testing.T, c *clustertest.Cluster, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	r, err := c.Client.RbacV1().Roles(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Rules = rules
	if _, err := c.Client.RbacV1().Roles(ns).Update(context.Background(), r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
