package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/pkg/events"
)

// JetStream's error codes for a stream whose storage it cannot reserve.
const (
	jsInsufficientResources       = 10023
	jsStorageResourcesExceeded    = 10047
	jsMemoryResourcesExceeded     = 10028
	jsAccountStorageLimitExceeded = 10027 // the account's limit, not the server's
)

// ErrSizing: the NATS store cannot hold the streams' limits.
var ErrSizing = errors.New("the NATS store is too small for the streams' limits")

// storageRefused reports whether err is JetStream refusing to reserve a
// stream's storage (its max bytes over what the server or the account may
// still store).
func storageRefused(err error) bool {
	var ae *jetstream.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode {
	case jsInsufficientResources, jsStorageResourcesExceeded, jsMemoryResourcesExceeded, jsAccountStorageLimitExceeded:
		return true
	}
	return false
}

// sizingError turns JetStream's refusal into one line: what the streams
// need, what the store has, and the settings to change.
func sizingError(ctx context.Context, err error, topo events.Topology, b *Bus) error {
	var need int64
	var parts []string
	for _, s := range []struct {
		env string
		sc  events.StreamConfig
	}{{"ENGRAM_IN_MAX_BYTES", topo.In}, {"ENGRAM_OUT_MAX_BYTES", topo.Out}, {"ENGRAM_DLQ_MAX_BYTES", topo.DLQ}} {
		if s.sc.MaxBytes <= 0 {
			parts = append(parts, fmt.Sprintf("%s unlimited (%s)", s.sc.Name, s.env))
			continue
		}
		need += s.sc.MaxBytes * int64(max(s.sc.Replicas, 1))
		parts = append(parts, fmt.Sprintf("%s %s (%s)", s.sc.Name, natsembed.HumanBytes(s.sc.MaxBytes), s.env))
	}
	have := "the JetStream storage the server may still reserve is less"
	if b != nil && b.Embedded != nil {
		if jc := b.Embedded.NATS().JetStreamConfig(); jc != nil {
			free := natsembed.FreeBytes(b.Embedded.StoreDir())
			have = fmt.Sprintf("the embedded NATS store may use %s (75%% of the space free on the volume of %s when it started; %s free now)",
				natsembed.HumanBytes(jc.MaxStore), b.Embedded.StoreDir(), natsembed.HumanBytes(free))
		}
	} else if b != nil && b.JS != nil {
		if ai, aerr := b.JS.AccountInfo(ctx); aerr == nil {
			limit := "the server's max_file_store"
			if ai.Limits.MaxStore > 0 {
				limit = natsembed.HumanBytes(ai.Limits.MaxStore) + " (the account's limit)"
			}
			have = fmt.Sprintf("the NATS account stores %s and may store %s", natsembed.HumanBytes(int64(ai.Store)), limit)
		}
	}
	return fmt.Errorf("%w: the streams reserve %s (%s); %s: free space on that volume, or lower %s (JetStream: %v)",
		ErrSizing, natsembed.HumanBytes(need), strings.Join(parts, ", "), have,
		"ENGRAM_IN_MAX_BYTES, ENGRAM_OUT_MAX_BYTES and ENGRAM_DLQ_MAX_BYTES", apiDescription(err))
}

func apiDescription(err error) string {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.Description
	}
	return err.Error()
}
