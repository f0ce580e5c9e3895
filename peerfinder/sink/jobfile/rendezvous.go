package jobfile

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Framework is the -rendezvous value: whose variables are written.
type Framework string

const (
	// Torch is torch.distributed's env:// rendezvous: MASTER_ADDR,
	// MASTER_PORT, WORLD_SIZE and RANK.
	Torch Framework = "torch"
	// TF is TensorFlow's TF_CONFIG.
	TF Framework = "tf"
)

// ParseFramework parses "torch" (also "pytorch") or "tf" (also
// "tensorflow").
func ParseFramework(s string) (Framework, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "torch", "pytorch":
		return Torch, nil
	case "tf", "tensorflow":
		return TF, nil
	}
	return "", fmt.Errorf("%q: want torch or tf", s)
}

// DefaultPort is the framework's customary port: torch's 29500 (what
// torchrun uses), TensorFlow's 2222 (what Kubeflow's TFJob uses).
func (f Framework) DefaultPort() int {
	if f == TF {
		return 2222
	}
	return 29500
}

// Var is one environment variable.
type Var struct {
	Name, Value string
}

// Env returns the framework's variables for the member at position self of
// members (Order's result); self -1 (this member is not ranked) leaves out
// what is about this member (RANK; TF_CONFIG's task). It is pure.
func (f Framework) Env(members []Member, self, port int) ([]Var, error) {
	if f == TF {
		b, err := json.Marshal(TFConfigOf(members, self, port))
		if err != nil {
			return nil, fmt.Errorf("encode TF_CONFIG: %w", err)
		}
		return []Var{{"TF_CONFIG", string(b)}}, nil
	}
	return TorchEnv(members, self, port), nil
}

// TorchEnv returns MASTER_ADDR (rank 0's name), MASTER_PORT, WORLD_SIZE (the
// number of members) and RANK (self's position) for torch.distributed's
// env:// initialisation. It is pure.
func TorchEnv(members []Member, self, port int) []Var {
	var env []Var
	if len(members) > 0 {
		env = append(env, Var{"MASTER_ADDR", members[0].Name})
	}
	env = append(env, Var{"MASTER_PORT", strconv.Itoa(port)}, Var{"WORLD_SIZE", strconv.Itoa(len(members))})
	if self >= 0 {
		env = append(env, Var{"RANK", strconv.Itoa(self)})
	}
	return env
}

// TFConfig is TensorFlow's TF_CONFIG (docs/tf-config.schema.json).
type TFConfig struct {
	// Cluster lists each role's (TensorFlow's job's) tasks as
	// "<name>:<port>", in index order.
	Cluster map[string][]string `json:"cluster"`
	// Task is this member's role and its position in that role's list;
	// nil when this member is not ranked.
	Task *TFTask `json:"task,omitempty"`
}

// TFTask is TF_CONFIG's task.
type TFTask struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// TFEvaluator is TensorFlow's evaluator job, which is not part of the
// training cluster: its members get a task but are not listed in it.
const TFEvaluator = "evaluator"

// TFConfigOf returns the TF_CONFIG of the member at position self of
// members: every role but TFEvaluator is a TensorFlow job of that name, its
// tasks the role's members in rank order; a task's index is its position
// among its role's members. It is pure.
func TFConfigOf(members []Member, self, port int) TFConfig {
	c := TFConfig{Cluster: map[string][]string{}}
	evaluators := 0
	for i, m := range members {
		index := len(c.Cluster[m.Role])
		if m.Role == TFEvaluator {
			index = evaluators
			evaluators++
		} else {
			c.Cluster[m.Role] = append(c.Cluster[m.Role], m.Name+":"+strconv.Itoa(port))
		}
		if i == self {
			c.Task = &TFTask{Type: m.Role, Index: index}
		}
	}
	return c
}

// RenderEnvFile returns vars as shell-sourceable lines, NAME='value', each
// value single-quoted (a quote inside closes the quoting, is escaped and
// reopens it), so that `. FILE` sets exactly the value whatever it holds. It is pure.
func RenderEnvFile(vars []Var) []byte {
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v.Name, ShellQuote(v.Value))
	}
	return []byte(b.String())
}

// envName is the start of a variable's line, up to the opening quote.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*='`)

// IsEnvFile reports whether content is an environment file as
// RenderEnvFile writes one: NAME='value' lines (a value may hold newlines
// and escaped quotes), blank lines between them. It is pure.
func IsEnvFile(content []byte) bool {
	s := string(content)
	for {
		if s = strings.TrimLeft(s, " \t\r\n"); s == "" {
			return true
		}
		loc := envName.FindStringIndex(s)
		if loc == nil {
			return false
		}
		s = s[loc[1]:]
		for { // the value, up to a quote that is not part of '\''
			i := strings.IndexByte(s, '\'')
			if i < 0 {
				return false
			}
			s = s[i+1:]
			rest, escaped := strings.CutPrefix(s, `\''`)
			if !escaped {
				break
			}
			s = rest
		}
		if s != "" && s[0] != '\n' {
			return false
		}
	}
}

// ShellQuote returns s in single quotes for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Environ returns vars as "NAME=value" strings for a process environment.
func Environ(vars []Var) []string {
	out := make([]string, len(vars))
	for i, v := range vars {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}
