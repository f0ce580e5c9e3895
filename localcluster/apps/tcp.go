package apps

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The campaign polls an application once a second per pod. Through an exec
// each poll costs the API server, the kubelet, a runc exec and a client
// process in the pod; asked over TCP from the host it costs a connection.
// The readers here ask the same questions as the exec readers (the same
// words, parsed by the same functions) at the pod's address; the campaign
// polls with them and confirms a healthy poll with the exec readers.

// eachAddr calls read for every pod at once with its address (its IP in
// r.IPs and port); a pod without an IP gets missing(pod).
func eachAddr[V any](r Reader, pods []string, port string, missing func(pod string) V, read func(pod, addr string) V) []V {
	return eachPod(pods, func(pod string) V {
		ip, ok := r.IPs[pod]
		if !ok {
			return missing(pod)
		}
		return read(pod, net.JoinHostPort(ip, port))
	})
}

// tcpTimeout bounds one question over TCP.
const tcpTimeout = 5 * time.Second

// dial connects to addr with ctx and tcpTimeout for the whole exchange.
func dial(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, tcpTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// fourLetterWord sends ZooKeeper's four-letter word w to addr and returns
// the answer (ZooKeeper closes the connection after it).
func fourLetterWord(ctx context.Context, addr, w string) (string, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, w); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	return string(b), err
}

// ReadZookeeperTCP is ReadZookeeper without a marker, asked at addr (the
// pod's IP and 2181): srvr and conf, as the exec reader's nc sends them.
func ReadZookeeperTCP(ctx context.Context, pod, addr string) ZookeeperView {
	srvr, err := fourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return ZookeeperView{Pod: pod, Err: "srvr: " + err.Error()}
	}
	conf, err := fourLetterWord(ctx, addr, "conf")
	if err != nil {
		return ZookeeperView{Pod: pod, Err: "conf: " + err.Error()}
	}
	return ParseZookeeper(pod, srvr+"\n---\n"+conf)
}

// ReadRedisTCP is ReadRedis asked at addr (the pod's IP and 6379): the
// inline command "INFO replication", its bulk reply parsed as redis-cli's
// output is.
func ReadRedisTCP(ctx context.Context, pod, addr string) RedisView {
	out, err := redisInline(ctx, addr, "INFO replication")
	if err != nil {
		return RedisView{Pod: pod, Err: "info replication: " + err.Error()}
	}
	return ParseRedisInfo(pod, out)
}

// redisInline sends one inline command and reads a bulk string reply
// ("$<n>\r\n<n bytes>\r\n"); an error reply ("-...") is an error.
func redisInline(ctx context.Context, addr, cmd string) (string, error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, cmd+"\r\n"); err != nil {
		return "", err
	}
	return readBulk(bufio.NewReader(conn))
}

// readBulk reads one RESP bulk string reply.
func readBulk(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case !strings.HasPrefix(line, "$"):
		return "", fmt.Errorf("redis: unexpected reply %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < -1 || n > 1<<20 {
		return "", fmt.Errorf("redis: bad bulk length %q", line)
	}
	if n == -1 {
		return "", nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b[:n]), nil
}
