package events

import (
	"errors"
	"testing"
)

// Each constructor builds its reason's Event with the note operators saw
// before Events were emitted explicitly (the same words, the same order).
func TestConstructors(t *testing.T) {
	forbidden := errors.New(`pods "db-0" is forbidden`)
	for _, tt := range []struct {
		got  Event
		want Event
	}{
		{PeersDelivered(3, 1, "form"), Event{Normal, ReasonPeersDelivered, "Deliver", "first peer set delivered: 3 peers (generation 1), bootstrap role form"}},
		{PeersDelivered(4, 2, ""), Event{Normal, ReasonPeersDelivered, "Deliver", "first peer set delivered: 4 peers (generation 2)"}},
		{BootstrapRole("join", "formed-by-other", "the cluster was formed by pod db-0"),
			Event{Normal, ReasonBootstrapRole, "Bootstrap", "join (formed-by-other): the cluster was formed by pod db-0"}},
		{SinkFailing("hook", errors.New("exit status 1")), Event{Warning, ReasonSinkFailing, "Deliver", "hook failing, retrying with the newest peer set: exit status 1"}},
		{SinkRecovered("hook"), Event{Normal, ReasonSinkRecovered, "Deliver", "hook recovered"}},
		{BootstrapTimeout(errors.New("bootstrap timeout: 2 of 5 peers")), Event{Warning, ReasonBootstrapTimeout, "Bootstrap", "bootstrap timeout: 2 of 5 peers"}},
		{DiscoverForbidden("list", "endpointslices", "db", "list,watch", "kubectl ..."),
			Event{Warning, ReasonForbidden, "Discover", "RBAC does not allow list endpointslices in namespace db; grant list,watch: kubectl ..."}},
		{OwnPodForbidden(forbidden), Event{Warning, ReasonForbidden, "Bootstrap", `cannot read own pod for -expect=auto, retrying: pods "db-0" is forbidden`}},
	} {
		if tt.got != tt.want {
			t.Errorf("got  %+v\nwant %+v", tt.got, tt.want)
		}
	}
}

func TestOrNop(t *testing.T) {
	if _, ok := OrNop(nil).(Nop); !ok {
		t.Error("OrNop(nil) is not Nop")
	}
	r := &Recording{}
	if OrNop(r) != r {
		t.Error("OrNop(r) is not r")
	}
}
