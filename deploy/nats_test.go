package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

// jsz is the part of the server's /jsz answer the KEDA nats-jetstream
// scaler reads (its jetStreamEndpointResponse).
type jsz struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name      string `json:"name"`
			Consumers []struct {
				Name          string `json:"name"`
				NumPending    int    `json:"num_pending"`
				NumAckPending int    `json:"num_ack_pending"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// kedaLag asks the monitoring endpoint what the KEDA scaler asks
// (/jsz?acc=<account>&consumers=true&config=true) and returns the lag it
// computes (pending + ack pending), or false when the account, stream or
// consumer is not there.
func kedaLag(t *testing.T, monitor, account, stream, consumer string) (int, bool) {
	t.Helper()
	u := fmt.Sprintf("http://%s/jsz?acc=%s&consumers=true&config=true", monitor, account)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j jsz
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	for _, a := range j.Accounts {
		if a.Name != account {
			continue
		}
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			for _, c := range s.Consumers {
				if c.Name == consumer {
					return c.NumPending + c.NumAckPending, true
				}
			}
		}
	}
	return 0, false
}

// TestNATSServerAsDeployed runs a real nats-server from deploy/nats/nats.conf
// (and accounts.conf; the Kubernetes base's copy until it exists), runs
// `engram setup`'s topology code against it as compose's setup user, logs
// every compose role in with its password, and checks that the KEDA
// scaler's query finds each ScaledObject's account, stream and consumer,
// whose lag follows that role's events.
func TestNATSServerAsDeployed(t *testing.T) {
	creds := credentials(t)
	opts := natsOptions(t, path("deploy", "nats", "nats.conf"), creds)
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", -1
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server from deploy/nats/nats.conf: %v", err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	monitor := srv.MonitorAddr().String()

	p, err := loadCompose(t, creds)
	if err != nil {
		t.Fatal(err)
	}
	connectAs := func(who, user, password string) *nats.Conn {
		opts := []nats.Option{nats.UserInfo(user, password)}
		if inbox := natsauth.ClientInbox(user); inbox != "" {
			// A worker, idle detector or setup process replies on an inbox
			// of its own role (natsauth.InboxPrefix), the only one its user
			// may subscribe to.
			opts = append(opts, nats.CustomInboxPrefix(inbox))
		}
		nc, err := nats.Connect(srv.ClientURL(), opts...)
		if err != nil {
			t.Fatalf("%s cannot log in to NATS as %q: %v", who, user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	connect := func(service string) *nats.Conn {
		env := envOf(p.Services[service])
		return connectAs("compose "+service, env["ENGRAM_NATS_USER"], env["ENGRAM_NATS_PASSWORD"])
	}
	for _, name := range append(workerRoles(), "setup", idle.ConsumerName) {
		connect(name)
	}
	if _, err := nats.Connect(srv.ClientURL(), nats.UserInfo("injector", "wrong")); err == nil {
		t.Fatal("NATS accepts a wrong password")
	}
	if _, err := nats.Connect(srv.ClientURL()); err == nil {
		t.Fatal("NATS accepts a client without credentials")
	}

	// engram setup, as compose runs it.
	setupEnv := envOf(p.Services["setup"])
	cfg := loadProcessConfig(t, "compose setup", kindOf(t, "compose setup", composeCommand(p.Services["setup"])), setupEnv)
	js, err := jetstream.New(connect("setup"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo, err := app.EnsureTopology(ctx, js, cfg)
	if err != nil {
		t.Fatalf("engram setup against the deployed NATS: %v", err)
	}

	// The idle detector opens its key-value bucket as the idle user, with
	// the configuration compose gives it (as app does at start).
	idleEnv := envOf(p.Services[idle.ConsumerName])
	idleCfg := loadProcessConfig(t, "compose idle", kindOf(t, "compose idle", composeCommand(p.Services[idle.ConsumerName])), idleEnv)
	idleNC := connect(idle.ConsumerName)
	ijs, err := jetstream.New(idleNC)
	if err != nil {
		t.Fatal(err)
	}
	icl, err := events.NewClient(idleNC, events.WithJetStream(ijs), events.WithPrefix(idleCfg.Events.SubjectPrefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idle.New(ctx, ijs, icl, idle.Options{Quiet: idleCfg.Idle.Quiet, Replicas: idleCfg.Events.Replicas}); err != nil {
		t.Fatalf("the idle detector cannot open its bucket on the deployed NATS: %v", err)
	}
	if _, err := ijs.Consumer(ctx, topo.In.Name, idle.ConsumerName); err != nil {
		t.Errorf("the idle detector's consumer %s, which engram setup creates: %v", idle.ConsumerName, err)
	}
	if _, err := ijs.KeyValue(ctx, idle.DefaultBucket); err != nil {
		t.Errorf("bucket %s: %v", idle.DefaultBucket, err)
	}

	// What KEDA reads, for every ScaledObject of every overlay.
	// Events come from a platform, as its own user.
	pub, err := jetstream.New(connectAs("a platform", "platform", creds[passwordVar("platform")]))
	if err != nil {
		t.Fatal(err)
	}
	for _, overlay := range []string{"dev", "production"} {
		r := render(t, overlay, creds)
		if len(r.scaled) != len(workerRoles()) {
			t.Errorf("%s: %d ScaledObjects, want one per worker role %v", overlay, len(r.scaled), workerRoles())
		}
		for name, so := range r.scaled {
			md := so.Spec.Triggers[0].Metadata
			lag, ok := kedaLag(t, monitor, md["account"], md["stream"], md["consumer"])
			if !ok {
				t.Errorf("%s ScaledObject %s: KEDA's query (account %q, stream %q, consumer %q) finds nothing on the server engram setup prepared; accounts there: %s",
					overlay, name, md["account"], md["stream"], md["consumer"], accountsWith(t, monitor, topo.In.Name))
				continue
			}
			cc, ok := topo.Consumer(md["consumer"])
			if !ok || len(cc.Types) == 0 {
				t.Errorf("%s ScaledObject %s: consumer %s is not in engram setup's topology", overlay, name, md["consumer"])
				continue
			}
			if _, err := pub.Publish(ctx, topo.Subjects().In(cc.Types[0], "", "deploytest", overlay+"-"+name), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			// The monitoring endpoint reports the consumer's state as of
			// its last update: wait a little for the new event to show.
			after, _ := kedaLag(t, monitor, md["account"], md["stream"], md["consumer"])
			for deadline := time.Now().Add(5 * time.Second); after != lag+1 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				after, _ = kedaLag(t, monitor, md["account"], md["stream"], md["consumer"])
			}
			if after != lag+1 {
				t.Errorf("%s ScaledObject %s: lag %d after one %s event, was %d: KEDA would not see that role's work", overlay, name, after, cc.Types[0], lag)
			}
		}
	}
	if got := len(topo.Consumers); got != len(events.DefaultTopology().Consumers)+1 {
		t.Errorf("engram setup made %d consumers, want the %d workers' and the idle detector's", got, len(events.DefaultTopology().Consumers))
	}
}

// accountsWith lists the accounts whose JetStream holds stream.
func accountsWith(t *testing.T, monitor, stream string) string {
	t.Helper()
	resp, err := http.Get("http://" + monitor + "/jsz?accounts=true&streams=true")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var j jsz
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return err.Error()
	}
	var names []string
	for _, a := range j.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				names = append(names, strconv.Quote(a.Name))
			}
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}
