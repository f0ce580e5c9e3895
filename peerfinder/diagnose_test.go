package peerfinder

import (
	"strings"
	"testing"

	"github.com/flockd/flock/peerfinder/bootstrap"
)

func TestDiagnoseRankSaysWhatIsAwaited(t *testing.T) {
	tests := []struct {
		name string
		rd   bootstrap.RankDecision
		want []string
	}{
		{name: "awaited and failed",
			rd:   bootstrap.RankDecision{Reason: bootstrap.RankAwaited, Awaited: []string{"db-1", "db-2"}, Failed: []string{"db-1"}, Detail: "1 of 3 ranks needed"},
			want: []string{"bootstrap: none yet (rank-awaited): 1 of 3 ranks needed", "awaiting the ranks of db-1, db-2 (failed: db-1) until -bootstrap-timeout"}},
		{name: "own rank first",
			rd:   bootstrap.RankDecision{Reason: bootstrap.RankAwaited, SelfRank: true, Detail: "this member's rank is needed"},
			want: []string{"runs the -form-rank command and records this member's rank"}},
		{name: "decided",
			rd:   bootstrap.RankDecision{Reason: bootstrap.LowerRank, Role: bootstrap.Join, Former: "db-2", Detail: "db-2 has the highest rank 9"},
			want: []string{"bootstrap: join (lower-rank): db-2 has the highest rank 9", "records db-2 in the Lease as the former first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			diagnoseRank(&b, tt.rd)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
