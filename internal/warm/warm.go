package warm

import (
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/ollama/ollama/api"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/fx"
	_ "go.uber.org/zap"
	_ "modernc.org/sqlite"
)
