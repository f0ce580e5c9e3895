package apps

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
)

// serve answers every connection to a loopback listener with answer(request
// line or word), then closes it; it returns the listener's address.
func serve(t *testing.T, read func(*bufio.Reader) string, answer func(string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.WriteString(conn, answer(read(bufio.NewReader(conn))))
			}()
		}
	}()
	return ln.Addr().String()
}

func TestReadZookeeperTCP(t *testing.T) {
	srvr, conf, _ := strings.Cut(zkOut("leader", "200000003", 0, 1, 2), "---\n")
	var asked []string
	addr := serve(t, func(r *bufio.Reader) string {
		b := make([]byte, 4)
		io.ReadFull(r, b)
		return string(b)
	}, func(w string) string {
		asked = append(asked, w)
		return map[string]string{"srvr": srvr, "conf": conf}[w]
	})
	v := ReadZookeeperTCP(t.Context(), "zk-0", addr)
	if v.Err != "" || v.Mode != "leader" || v.Version != "200000003" || len(v.Servers) != 3 {
		t.Errorf("view %+v", v)
	}
	if !slices.Equal(asked, []string{"srvr", "conf"}) {
		t.Errorf("asked %q; want srvr, conf", asked)
	}
	if want := ParseZookeeper("zk-0", zkOut("leader", "200000003", 0, 1, 2)); !slices.Equal(v.Servers, want.Servers) || v.Mode != want.Mode {
		t.Errorf("TCP view %+v differs from the exec reader's %+v", v, want)
	}
	if v := ReadZookeeperTCP(t.Context(), "zk-0", closedAddr(t)); !strings.HasPrefix(v.Err, "srvr: ") || v.Mode != "" {
		t.Errorf("nothing listening: %+v; want an srvr error", v)
	}
}

func TestReadRedisTCP(t *testing.T) {
	var asked []string
	reply := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
	answers := map[string]string{"INFO replication": reply(primaryInfo)}
	addr := serve(t, func(r *bufio.Reader) string {
		line, _ := r.ReadString('\n')
		return strings.TrimRight(line, "\r\n")
	}, func(cmd string) string {
		asked = append(asked, cmd)
		if a, ok := answers[cmd]; ok {
			return a
		}
		return "-ERR unknown command\r\n"
	})
	v := ReadRedisTCP(t.Context(), "redis-0", addr)
	if want := ParseRedisInfo("redis-0", primaryInfo); v.Err != "" || v.Role != want.Role || !slices.Equal(v.Replicas, want.Replicas) || v.ReplID != want.ReplID {
		t.Errorf("view %+v; want %+v", v, want)
	}
	if !slices.Equal(asked, []string{"INFO replication"}) {
		t.Errorf("asked %q", asked)
	}
	answers["INFO replication"] = "-LOADING Redis is loading the dataset in memory\r\n"
	if v := ReadRedisTCP(t.Context(), "redis-0", addr); !strings.Contains(v.Err, "LOADING") || v.Role != "" {
		t.Errorf("error reply: %+v; want the error", v)
	}
	answers["INFO replication"] = "$100\r\nrole:mas"
	if v := ReadRedisTCP(t.Context(), "redis-0", addr); v.Err == "" || v.Role != "" {
		t.Errorf("short reply: %+v; want an error", v)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
