package redis

import "testing"

// Only online replicas count: one still in its first synchronisation
// (after a restart, a full resync) acknowledges nothing until it is done.
func TestOnlineReplicas(t *testing.T) {
	for _, c := range []struct {
		info string
		want int
	}{
		{"# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n", 0},
		{"role:master\r\nconnected_slaves:2\r\nslave0:ip=10.0.0.2,port=6379,state=online,offset=120,lag=0\r\n" +
			"slave1:ip=10.0.0.3,port=6379,state=online,offset=118,lag=1\r\nslave_read_repl_offset:1\r\n", 2},
		{"role:master\r\nconnected_slaves:2\r\nslave0:ip=10.0.0.2,port=6379,state=wait_bgsave,offset=0,lag=0\r\n" +
			"slave1:ip=10.0.0.3,port=6379,state=online,offset=118,lag=1\r\n", 1},
		{"role:master\r\nconnected_slaves:1\r\nslave0:ip=10.0.0.2,port=6379,state=send_bulk,offset=0,lag=0\r\n", 0},
	} {
		if got := onlineReplicas(c.info); got != c.want {
			t.Errorf("onlineReplicas(%q) = %d, want %d", c.info, got, c.want)
		}
	}
}
