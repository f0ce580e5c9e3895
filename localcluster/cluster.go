package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Fixed addressing of every local cluster. Pod IPs are not loopback because
// EndpointSlices reject 127.0.0.0/8.
const (
	Domain           = "cluster.local"
	PodCIDR          = "10.244.0.0/16"
	serviceCIDR      = "10.96.0.0/16"
	serviceClusterIP = "10.96.0.1"
)

// Options configure a cluster. Zero values take the defaults noted.
type Options struct {
	StateDir  string // required
	CacheRoot string // required; where Build put the binaries
	// Nodes is the number of simulated nodes (default 4), spread round robin
	// over Zones zones (default 2).
	Nodes, Zones int
	// ReadyDelay is how long a started pod stays not ready (default 500ms).
	ReadyDelay time.Duration
	// RealNodes is how many real nodes to start (default 0; flock-cluster
	// and the shared test cluster use RealNodesFromEnv).
	RealNodes int
	// ImagesDir holds the OCI archives the real nodes import (make images).
	ImagesDir string
	// Timeout bounds the start (default 2m).
	Timeout  time.Duration
	Log      *slog.Logger
	Progress io.Writer // human progress lines; nil discards
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 4
	}
	if o.Zones == 0 {
		o.Zones = 2
	}
	if o.ReadyDelay == 0 {
		o.ReadyDelay = 500 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// State describes a started cluster; it is stored as state.json in the state dir.
type State struct {
	StateDir   string `json:"stateDir"`
	Kubeconfig string `json:"kubeconfig"` // admin
	Server     string `json:"server"`     // kube-apiserver URL
	DNSAddr    string `json:"dnsAddr"`    // CoreDNS host:port, UDP and TCP
	Domain     string `json:"domain"`
	Nodes      int    `json:"nodes"`
	// RealNodes are the real nodes, if any; RealNodeSkipped says why there
	// are none.
	RealNodes       []*RealNode `json:"realNodes,omitempty"`
	RealNodeSkipped string      `json:"realNodeSkipped,omitempty"`
	// ImagesDir holds the OCI archives the real nodes import
	// (Options.ImagesDir at the start; AddRealNode's nodes too).
	ImagesDir string    `json:"imagesDir,omitempty"`
	Started   time.Time `json:"started"`
	// Procs are the processes started, in start order; they stop in reverse.
	Procs []Proc `json:"procs"`
}

// Proc is one started component process.
type Proc struct {
	Name string   `json:"name"`
	Pid  int      `json:"pid"`
	Args []string `json:"args"` // argv, for restarts
	// StartTime is the process start time from /proc/<pid>/stat; together with
	// the pid it identifies the process, so a reused pid is never signalled.
	StartTime uint64 `json:"startTime"`
	// Down marks a process stopped on purpose (a node fault): it is not
	// expected to run until it is started again.
	Down bool `json:"down,omitempty"`
}

// DefaultStateDir is $FLOCK_STATE_DIR, else <repoRoot>/.state/cluster: one
// cluster per checkout, shared by everything run from it.
func DefaultStateDir(repoRoot string) string {
	if d := os.Getenv("FLOCK_STATE_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, ".state", "cluster")
}

// ErrNotRunning means the state dir has no live cluster.
var ErrNotRunning = errors.New("local cluster not running")

const stateFile = "state.json"

// Load reads the state of the cluster in dir and checks that every process it
// started is still alive. It returns ErrNotRunning otherwise.
func Load(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s in %s)", ErrNotRunning, stateFile, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, stateFile), err)
	}
	for _, p := range s.Procs {
		if !p.Down && !p.alive() {
			return &s, fmt.Errorf("%w (%s, pid %d, exited; see %s)", ErrNotRunning, p.Name, p.Pid, s.LogFile(p.Name))
		}
	}
	return &s, nil
}

// LogFile is the log of a component.
func (s *State) LogFile(component string) string {
	return filepath.Join(s.StateDir, "logs", component+".log")
}

// RESTConfig is the admin client configuration.
func (s *State) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", s.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200 // a test bed, not a shared production server
	return cfg, nil
}

// Env is the environment that points tools at the cluster, as KEY=value.
func (s *State) Env(cacheRoot string) []string {
	return []string{
		"KUBECONFIG=" + s.Kubeconfig,
		"FLOCK_DNS=" + s.DNSAddr,
		"FLOCK_CLUSTER_DOMAIN=" + s.Domain,
		"FLOCK_STATE_DIR=" + s.StateDir,
		"FLOCK_UPSTREAM_PEER_FINDER=" + UpstreamPeerFinder(cacheRoot),
	}
}

// Up starts a cluster in o.StateDir, or returns the running one (started is
// false then). Concurrent calls for one state dir wait for each other.
func Up(ctx context.Context, o Options) (s *State, started bool, err error) {
	s, started, release, err := up(ctx, o, false)
	if release != nil {
		release()
	}
	return s, started, err
}

// Acquire is Up that also registers the caller as a user of the cluster until
// release is called or the process exits. StopIfUnused does not stop a
// cluster that has users.
func Acquire(ctx context.Context, o Options) (s *State, started bool, release func(), err error) {
	return up(ctx, o, true)
}

func up(ctx context.Context, o Options, hold bool) (s *State, started bool, release func(), err error) {
	o.defaults()
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, false, nil, fmt.Errorf("create state dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(o.StateDir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return nil, false, nil, err
	}
	defer unlock()
	release = func() {}
	if hold {
		// Registered under up.lock, so StopIfUnused cannot slip in between.
		if release, err = lockFile(ctx, filepath.Join(o.StateDir, "users.lock"), syscall.LOCK_SH); err != nil {
			return nil, false, nil, err
		}
	}
	s, started, err = upLocked(ctx, o)
	if err != nil {
		release()
		return nil, false, nil, err
	}
	return s, started, release, nil
}

func upLocked(ctx context.Context, o Options) (*State, bool, error) {
	old, err := Load(o.StateDir)
	if err == nil {
		err = old.healthy(ctx)
		for _, n := range old.RealNodes {
			if err == nil && n.Down == "" {
				err = n.LoadImages(ctx, o.ImagesDir) // rebuilt since the start
			}
		}
		if err == nil {
			o.Log.Debug("reusing running cluster", "state_dir", o.StateDir)
			return old, false, nil
		}
		o.Log.Warn("running cluster is unhealthy, restarting it", "err", err)
	}
	if old != nil {
		old.stop(o.Log)
	}
	s, err := start(ctx, o)
	if err != nil && strings.Contains(err.Error(), "address already in use") {
		// A free port was taken between choosing and binding it, by another
		// process of this shared machine; new ports will do.
		o.Log.Warn("port taken during start, retrying with new ports", "err", err)
		s, err = start(ctx, o)
	}
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// ephemeralFile marks a cluster started only for the duration of one command
// (see SetEphemeral).
const ephemeralFile = "ephemeral"

// SetEphemeral marks the cluster in dir as started for a single command
// (true), to be stopped by StopIfUnused, or as wanted beyond it (false).
func SetEphemeral(dir string, on bool) error {
	p := filepath.Join(dir, ephemeralFile)
	if on {
		return os.WriteFile(p, nil, 0o644)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear ephemeral mark: %w", err)
	}
	return nil
}

// StopIfUnused stops the cluster in dir if it is marked ephemeral and no
// process holds it through Acquire. Callers of SetEphemeral(dir, true) call it
// after their release, so the last of them to finish stops the cluster.
func StopIfUnused(ctx context.Context, dir string, log *slog.Logger) (stopped bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, ephemeralFile)); err != nil {
		return false, nil
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return false, err
	}
	defer unlock()
	unuse, ok, err := tryLock(filepath.Join(dir, "users.lock"), syscall.LOCK_EX)
	if err != nil || !ok {
		return false, err
	}
	defer unuse()
	if err := downLocked(dir, log); err != nil {
		return false, err
	}
	return true, SetEphemeral(dir, false)
}

// healthy checks that the API server answers /readyz.
func (s *State) healthy(ctx context.Context) error {
	cs, err := s.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("kube-apiserver /readyz: %w", err)
	}
	return nil
}

func (s *State) client() (kubernetes.Interface, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return cs, nil
}

// Down stops the cluster in dir: exactly the processes Up started, etcd last.
// It is not an error if none is running.
func Down(ctx context.Context, dir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	return downLocked(dir, log)
}

func downLocked(dir string, log *slog.Logger) error {
	s, err := Load(dir)
	if s == nil {
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		return err
	}
	s.stop(log)
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cluster state: %w", err)
	}
	return nil
}

// stop terminates the recorded processes in reverse start order, then
// undoes what the real node set up on the machine.
func (s *State) stop(log *slog.Logger) {
	for i := len(s.Procs) - 1; i >= 0; i-- {
		p := s.Procs[i]
		if err := p.stop(10 * time.Second); err != nil {
			log.Warn("stop component", "component", p.Name, "pid", p.Pid, "err", err)
			continue
		}
		log.Debug("stopped component", "component", p.Name, "pid", p.Pid)
	}
	if len(s.RealNodes) > 0 {
		if err := releaseNodes(s.StateDir); err != nil {
			log.Warn("clean up real nodes", "err", err)
		}
	}
}

func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cluster state: %w", err)
	}
	tmp := filepath.Join(s.StateDir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.StateDir, stateFile)); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

// starter is the startFunc that records each process it starts in s and
// saves s, so that "down" finds a half-started cluster too.
func (s *State) starter(log *slog.Logger) startFunc {
	return func(name, bin string, args ...string) error {
		p, err := startProc(s.StateDir, name, bin, args)
		if err != nil {
			return err
		}
		s.Procs = append(s.Procs, p)
		log.Debug("started component", "component", name, "pid", p.Pid)
		return s.save()
	}
}

// stepper returns a function that prints a progress line for each step
// done, with the time since stepper was called.
func stepper(w io.Writer) func(what string) {
	begin := time.Now()
	return func(what string) { fmt.Fprintf(w, "  %-36s %5.1fs\n", what, time.Since(begin).Seconds()) }
}

// FreePorts reserves n distinct free TCP ports on 127.0.0.1 (also free for UDP
// where CoreDNS needs it) by binding and releasing them.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken for UDP; try another
		}
		held = append(held, u)
		ports = append(ports, port)
	}
	return ports, nil
}

// Restart stops one component and starts it again with the same arguments,
// then waits until the API server is ready. Other users of the cluster see the
// outage, so it is meant for clusters owned by one test.
func (s *State) Restart(ctx context.Context, component string) error {
	return s.Outage(ctx, component, 0)
}

// Outage is Restart with the component down for d before it starts again
// (a fault: e.g. CoreDNS unreachable for 20 s).
func (s *State) Outage(ctx context.Context, component string, d time.Duration) error {
	unlock, err := lockFile(ctx, filepath.Join(s.StateDir, "up.lock"), syscall.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	i := slices.IndexFunc(s.Procs, func(p Proc) bool { return p.Name == component })
	if i < 0 {
		return fmt.Errorf("restart %s: no such component", component)
	}
	if err := s.Procs[i].stop(10 * time.Second); err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	if err := s.restartProc(component); err != nil {
		return fmt.Errorf("restart %s: %w", component, err)
	}
	if err := s.save(); err != nil {
		return err
	}
	cs, err := s.client()
	if err != nil {
		return err
	}
	return waitAPI(ctx, s, cs)
}
