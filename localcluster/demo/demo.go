// Package demo runs flock's main demonstration against the local cluster: a
// headless Service and a StatefulSet whose members' hook deliveries are shown
// live while the StatefulSet is scaled. With Config.Image the members are
// real pods on the cluster's real nodes, peer-finder a native sidecar in each;
// without it, one peer-finder process per simulated member runs here.
package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/internal/ordinal"
)

// Config configures Run.
type Config struct {
	Client      kubernetes.Interface
	PeerFinder  string // peer-finder binary
	HookDir     string // holds on-start.sh and on-change.sh
	DNSAddr     string // CoreDNS host:port
	Domain      string // cluster domain
	LogDir      string // emptied, then receives one log per member
	Steps       []int  // replica counts in order; the first is the initial size
	StepTimeout time.Duration
	Pause       time.Duration // after each step, so people can follow
	Out         io.Writer
	Color       bool
	// Image, when set, runs the members as real pods on the real nodes with
	// this peer-finder image; PeerFinder and DNSAddr are then unused.
	Image string
}

const service = "web"

// Run runs the demo and removes everything it created before returning.
func Run(ctx context.Context, c Config) (err error) {
	if len(c.Steps) == 0 {
		return errors.New("no steps")
	}
	if err := os.RemoveAll(c.LogDir); err != nil {
		return fmt.Errorf("clean log dir: %w", err)
	}
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	d := &demo{Config: c, members: map[string]*member{}}
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "flock-demo-"}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	d.ns = ns.Name
	where := "peer-finder per member on this machine (simulated pods)"
	if c.Image != "" {
		where = "real pods on the real nodes, " + c.Image + " as a native sidecar"
	}
	d.say("namespace %s: headless Service %q (publishNotReadyAddresses) and a StatefulSet of %d: %s", d.ns, service, c.Steps[0], where)
	defer func() {
		d.stopAll()
		cleanup := context.WithoutCancel(ctx)
		if derr := c.Client.CoreV1().Namespaces().Delete(cleanup, d.ns, metav1.DeleteOptions{}); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete namespace %s: %w", d.ns, derr))
		} else {
			d.say("deleted namespace %s; stopped every peer-finder", d.ns)
		}
		d.say("logs: %s (<member>.log: peer-finder, <member>.hooks: hook output)", c.LogDir)
	}()
	if err := d.createWorkload(ctx); err != nil {
		return err
	}
	tailDone := make(chan struct{})
	tailCtx, stopTail := context.WithCancel(ctx)
	go func() { defer close(tailDone); d.tail(tailCtx) }()
	defer func() { stopTail(); <-tailDone }()

	for i, n := range c.Steps {
		if i > 0 {
			d.say("scaling StatefulSet %s to %d", service, n)
			if err := d.scale(ctx, n); err != nil {
				return err
			}
		}
		if err := d.converge(ctx, n); err != nil {
			return err
		}
		d.say("all %d members agree: %s", n, strings.Join(memberNames(n), " "))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.Pause):
		}
	}
	return nil
}

type demo struct {
	Config
	ns string

	mu      sync.Mutex
	members map[string]*member
	outMu   sync.Mutex
}

// member is one running peer-finder, acting as pod name.
type member struct {
	name   string
	cmd    *exec.Cmd          // peer-finder on this machine (simulated members)
	cancel context.CancelFunc // stops following the pod's log (real pods)
	exited chan struct{}
	hooks  string // path of the hooks' output
	offset int64  // how much of hooks was printed
	peers  string // peers of the last delivery, as printed by the hook
}

func (d *demo) createWorkload(ctx context.Context) error {
	labels := map[string]string{"app": service}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 labels,
			Ports:                    []corev1.ServicePort{{Name: "peer", Port: 7000}},
		},
	}
	if _, err := d.Client.CoreV1().Services(d.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: service},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: service,
			Replicas:    ptr.To(int32(d.Steps[0])),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}},
				},
			},
		},
	}
	if d.Image != "" {
		if err := d.realPods(ctx, sts); err != nil {
			return err
		}
	}
	if _, err := d.Client.AppsV1().StatefulSets(d.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create statefulset: %w", err)
	}
	return nil
}

func (d *demo) scale(ctx context.Context, n int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := d.Client.AppsV1().StatefulSets(d.ns).Patch(ctx, service, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale to %d: %w", n, err)
	}
	return nil
}

// converge runs a peer-finder for every pod that exists, stops those whose
// pod is gone, and returns when every running member's last delivery is
// exactly the n expected peers.
func (d *demo) converge(ctx context.Context, n int) error {
	want := strings.Join(memberNames(n), " ")
	ctx, cancel := context.WithTimeout(ctx, d.StepTimeout)
	defer cancel()
	for {
		pods, err := d.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + service})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("list pods: %w", err)
		}
		alive := map[string]string{} // pod -> node
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.PodIP != "" && (d.Image == "" || running(&p, "app")) {
				alive[p.Name] = p.Spec.NodeName
			}
		}
		for name, node := range alive {
			if err := d.start(name, node); err != nil {
				return err
			}
		}
		done := len(alive) == n
		d.mu.Lock()
		var gone []*member
		for name, m := range d.members {
			if _, ok := alive[name]; !ok {
				gone = append(gone, m)
				delete(d.members, name)
				continue
			}
			if m.peers != want {
				done = false
			}
		}
		d.mu.Unlock()
		for _, m := range gone {
			d.stop(m, "pod is gone")
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("members did not all see %q within %s; see %s: %w", want, d.StepTimeout, d.LogDir, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// start runs peer-finder as member name (on node, for real pods) unless it
// runs already.
func (d *demo) start(name, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.members[name]; ok {
		return nil
	}
	if d.Image != "" {
		return d.follow(name, node)
	}
	logf, err := os.OpenFile(filepath.Join(d.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logf.Close()
	m := &member{name: name, hooks: filepath.Join(d.LogDir, name+".hooks"), exited: make(chan struct{})}
	if err := os.WriteFile(m.hooks, nil, 0o644); err != nil {
		return fmt.Errorf("create hook output of %s: %w", name, err)
	}
	args := []string{
		"-hostname=" + name, "-service=" + service, "-ns=" + d.ns, "-domain=" + d.Domain,
		"-dns-server=" + d.DNSAddr,
		"-on-start=" + filepath.Join(d.HookDir, "on-start.sh"),
		"-on-change=" + filepath.Join(d.HookDir, "on-change.sh"),
	}
	m.cmd = exec.Command(d.PeerFinder, args...)
	m.cmd.Env = append(os.Environ(), "FLOCK_DEMO_OUT="+m.hooks)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us; we stop members in order
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start peer-finder as %s: %w", name, err)
	}
	go func() {
		err := m.cmd.Wait()
		close(m.exited)
		d.mu.Lock()
		current := d.members[name] == m
		d.mu.Unlock()
		if current && err != nil {
			d.print(name, fmt.Sprintf("peer-finder exited: %v (see %s)", err, filepath.Join(d.LogDir, name+".log")))
		}
	}()
	d.members[name] = m
	d.print(name, "peer-finder "+strings.Join(args, " "))
	return nil
}

func (d *demo) stop(m *member, why string) {
	if m.cancel != nil {
		m.cancel()
		<-m.exited
		d.flush(m)
		d.print(m.name, "pod stopped: "+why)
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(5 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	d.flush(m)
	d.print(m.name, "peer-finder stopped: "+why)
}

func (d *demo) stopAll() {
	d.mu.Lock()
	ms := make([]*member, 0, len(d.members))
	for _, m := range d.members {
		ms = append(ms, m)
	}
	d.members = map[string]*member{}
	d.mu.Unlock()
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	for _, m := range ms {
		d.stop(m, "demo over")
	}
}

// tail prints new hook output of every member as it appears.
func (d *demo) tail(ctx context.Context) {
	for {
		d.mu.Lock()
		ms := make([]*member, 0, len(d.members))
		for _, m := range d.members {
			ms = append(ms, m)
		}
		d.mu.Unlock()
		slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.name, b.name) })
		for _, m := range ms {
			d.flush(m)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// flush prints the complete lines m's hooks wrote since the last flush and
// records the peers of the newest delivery.
func (d *demo) flush(m *member) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.Open(m.hooks)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(m.offset, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // an incomplete line waits for the next flush
		}
		m.offset += int64(len(line))
		line = strings.TrimRight(line, "\n")
		if _, after, ok := strings.Cut(line, " peers: "); ok {
			m.peers, _, _ = strings.Cut(after, " |")
		}
		d.print(m.name, line)
	}
}

// colors for member prefixes on a terminal.
var colors = []string{"\x1b[36m", "\x1b[33m", "\x1b[35m", "\x1b[32m", "\x1b[34m", "\x1b[31m"}

func (d *demo) print(name, line string) {
	prefix := fmt.Sprintf("[%s]", name)
	if d.Color {
		i := max(ordinal.FromName(name), 0)
		prefix = colors[i%len(colors)] + prefix + "\x1b[0m"
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.Out, "%s %s %s\n", time.Now().Format("15:04:05.000"), prefix, line)
}

func (d *demo) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if d.Color {
		line = "\x1b[1m" + line + "\x1b[0m"
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.Out, "%s == %s\n", time.Now().Format("15:04:05.000"), line)
}

func memberNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", service, i)
	}
	return names
}
