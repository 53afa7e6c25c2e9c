package redis

// ACLCommands are the commands the store needs, as ACL SETUSER rules: the
// connection, transaction and scripting commands, the commands of the data
// types it uses (hashes, sets, sorted sets, lists, strings, generic key
// commands such as SCAN, UNLINK, EXPIRE) without the dangerous ones
// (FLUSHALL, KEYS, DEBUG, CONFIG...), and the vector-set commands, which
// Redis 8 puts in no category. The key pattern is the namespace's
// (~<namespace>:*, "~engram:*" by default) and no pub/sub channel is
// needed:
//
//	ACL SETUSER engram on >PASSWORD resetkeys ~engram:* resetchannels <ACLCommands>
//
// INFO, BGREWRITEAOF and BGSAVE are for an erasure's Purge: the
// append-only file (and a snapshot) rewritten so that they no longer hold
// what was erased (without them Purge reports the step as not done).
// INFO and WAIT are for Durable (durable.go): a worker acknowledges an
// event only once its writes are on a replica; Ping fails when the user
// may not send WAIT (unless WithReplicaWait(0)).
//
// TestConformanceUnderACL runs the whole store contract as such a user.
// A Redis Cluster client also needs the topology commands:
// +cluster|slots +cluster|shards +cluster|nodes +readonly (not tested).
const ACLCommands = "-@all +@connection +@transaction +@scripting +@keyspace +@hash +@set +@sortedset +@list +@string " +
	"-@dangerous -@blocking -@admin " +
	"+vadd +vrem +vsim +vemb +vcard +vdim +vinfo +vgetattr +vsetattr +vismember +vlinks +vrandmember " +
	"+info +bgrewriteaof +bgsave +wait"
